// The config keys as command-line flags: `--config FILE` and one `--section.key` flag per key of
// the registry (train/config/config_keys.h) on a subcommand, applied file first, then flags.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "train/config/config_keys.h"

// CLI11 is declared only: its header alone takes seconds of CPU to compile at -O3 (6 s measured
// on a loaded 2-core machine), and commands.h brings this header into every command's file.
// cli.cpp, config_flags.cpp and memory_command.cpp, which build the command line, include it.
namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace ledgerlm {

// Registers `--config FILE` and every `--section.key` flag on a subcommand. After parsing,
// config_apply() loads the file (if any) and then the flags given on the command line: the
// command line wins. Returns the flags the command line set (for logging resume changes).
struct ConfigBinding {
  std::vector<ConfigKey> keys;
  std::map<std::string, std::string> flag_values;  // "section.key" -> value (as given)
  std::map<std::string, CLI::Option*> flag_options;
  std::string config_path;
  // Every key the config file or a flag set ("section.key"); the others hold their defaults.
  std::set<std::string> explicit_keys;
};
void config_register_flags(CLI::App* app, ConfigBinding* binding, RunConfig* config,
                           bool with_config_file = true);
void config_apply(ConfigBinding* binding);

}  // namespace ledgerlm
