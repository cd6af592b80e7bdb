// Fuzz target: config handling (train/config/config_file.h, train/config/config_keys.h) — TOML text
// through toml++ and the typed key registry, or (mode byte odd) `section.key=value` lines through
// the flag parser — then RunConfig::validate(). Properties checked on every accepted input: the
// resolved config.toml text reads back to exactly the same text (a value that does not survive
// config.toml would silently change a resumed run), so a difference aborts. Accepted: the input
// loaded without error (validation may still refuse the values).
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "model/base/check.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/config/config_file.h"
#include "train/config/config_keys.h"

namespace {

using namespace ledgerlm;

void load_flags(const std::string& text, const std::vector<ConfigKey>& keys) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    for (const ConfigKey& k : keys)
      if (k.full() == line.substr(0, eq)) config_set(k, line.substr(eq + 1), "flag --" + k.full());
  }
}

void check_round_trip(RunConfig& config) {
  const std::string text = config_to_toml(config_keys(config));
  RunConfig again;
  config_load_toml(text, "resolved config", config_keys(again));
  if (config_to_toml(config_keys(again)) != text) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static fuzz::Stats stats("fuzz_config");
  if (size == 0) return 0;
  stats.input();
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  RunConfig config;
  try {
    const std::vector<ConfigKey> keys = config_keys(config);
    if (data[0] & 1) {
      load_flags(text, keys);
    } else {
      config_load_toml(text, "config file 'fuzz.toml'", keys);
    }
    stats.accept();
  } catch (const Error&) {
    return 0;
  }
  check_round_trip(config);
  try {
    if (config.model.vocab_size == 0) config.model.vocab_size = 257;  // as the data would set it
    config.validate();
  } catch (const Error&) {
  }
  return 0;
}
