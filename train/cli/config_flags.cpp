// Config keys as command-line flags (see config_flags.h).
#include "train/cli/config_flags.h"

#include <CLI/CLI.hpp>

#include "train/config/config_file.h"

namespace ledgerlm {

void config_register_flags(CLI::App* app, ConfigBinding* binding, RunConfig* config,
                           bool with_config_file) {
  binding->keys = config_keys(*config);
  if (with_config_file)
    app->add_option("--config", binding->config_path, "TOML config file (configs/*.toml)");
  for (const auto& k : binding->keys) {
    std::string name = k.full();
    // The last occurrence wins, so a script can append overrides to a fixed set of flags.
    CLI::Option* opt = app->add_option("--" + name, binding->flag_values[name], k.help)
                           ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    binding->flag_options[name] = opt;
  }
}

void config_apply(ConfigBinding* binding) {
  if (!binding->config_path.empty())
    binding->explicit_keys = config_load_file(binding->config_path, binding->keys);
  std::map<std::string, std::string> given;
  for (const auto& k : binding->keys) {
    CLI::Option* opt = binding->flag_options[k.full()];
    if (opt && opt->count() > 0) {
      config_set(k, binding->flag_values[k.full()], "flag --" + k.full());
      given[k.full()] = binding->flag_values[k.full()];
      binding->explicit_keys.insert(k.full());
    }
  }
  binding->flag_values = given;
}

}  // namespace ledgerlm
