// Config files: TOML read by toml++ (a real TOML 1.0 parser: typed values, comments and `#`
// inside quoted strings, repeated tables refused, syntax errors reported with their line and
// column) and validated against the key registry (config_keys.h), the same typed schema the
// `--section.key` flags go through. A value must have its key's type: an integer key takes a TOML
// integer, a float key an integer or a finite float, a bool key `true` or `false`, a string key a
// string. Unknown sections and keys, keys outside a section, arrays and dates are errors naming
// the origin (the file), the key and the line.
//
// The same loader reads `ledgerlm train --config FILE`, a run's saved config.toml (eval, sample,
// export, resume) and the config a checkpoint's meta.json carries.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "train/config/config_keys.h"

namespace ledgerlm {

// Sets the fields bound by `keys` from TOML `text`; `origin` names the text in errors (e.g.
// "config file 'configs/demo.toml'"). Returns the keys ("section.key") the text set.
std::set<std::string> config_load_toml(std::string_view text, const std::string& origin,
                                       const std::vector<ConfigKey>& keys);

// Reads `path` and loads it as above; errors name the file.
std::set<std::string> config_load_file(const std::string& path, const std::vector<ConfigKey>& keys);

}  // namespace ledgerlm
