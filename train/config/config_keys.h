// The key registry: every config key as (section, key, typed field). It drives TOML loading,
// the `--section.key` command-line flags (train/cli/config_flags.h), error messages and the
// resolved config.toml, so a key added to a config struct and registered here is available
// everywhere at once.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "train/config/run_config.h"

namespace ledgerlm {

enum class KeyType { kInt, kFloat, kBool, kString };

// What a key's value means to a saved run, declared with the key (one line in config_keys.cpp)
// so that a new model variant's key is refused on resume and adopted by --init-from without an
// edit anywhere else.
enum class KeyRole {
  kSetting,       // may differ between a run and its resume (LR, steps, threads, dropout...)
  kArchitecture,  // gives the parameter table its tensors and shapes: refused on resume, taken
                  // from the source by --init-from
  kSavedState,    // what the saved state means (optimizer, adapters, frozen set, tokenizer):
                  // refused on resume
};

struct ConfigKey {
  std::string section;
  std::string key;
  KeyType type;
  void* field;
  std::string help;
  KeyRole role = KeyRole::kSetting;
  std::string full() const { return section + "." + key; }
};

// All keys of a RunConfig, bound to the fields of `config`.
std::vector<ConfigKey> config_keys(RunConfig& config);

// TOML files are read by config_file.h, against the same registry.

// Sets a field from the text of a command-line flag; ill-typed values are an error naming
// `origin` and the key. Integers (also written as 1e6), finite numbers, `true` / `false`, and
// strings of UTF-8 text.
void config_set(const ConfigKey& key, const std::string& value, const std::string& origin);

// Text of the fully resolved config, as TOML (sections in registry order); config_file.h reads
// it back to the same values.
std::string config_to_toml(const std::vector<ConfigKey>& keys);
// A value as TOML text (strings quoted and escaped).
std::string config_value_text(const ConfigKey& key);
// A value as a person reads it in messages (strings bare).
std::string config_display_text(const ConfigKey& key);

}  // namespace ledgerlm
