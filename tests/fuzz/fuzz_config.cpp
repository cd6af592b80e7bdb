// Fuzz target: config handling (train/config/config_file.h, train/config/config_keys.h) — TOML text
// through toml++ and the typed key registry, or (mode byte odd) `section.key=value` lines through
// the flag parser — then RunConfig::validate(). Properties checked on every accepted input: the
// resolved config.toml text reads back to exactly the same text (a value that does not survive
// config.toml would silently change a resumed run), so a difference aborts. Accepted: the input
// loaded without error (validation may still refuse the values).
// Mode byte with bit 1 set: the text is a Hugging Face GPT-2 config.json for `import --format hf`
// (ckpt/hf_import.h). An accepted one must give a valid ModelConfig that export's config.json
// text (ckpt/hf_export.h) describes again exactly.
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>

#include "ckpt/hf_export.h"
#include "ckpt/hf_import.h"
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

// An accepted config.json: valid, and export's text of it reads back to the same sizes.
void check_hf_config(const std::string& text, fuzz::Stats& stats) {
  ModelConfig m;
  try {
    m = hf_config_from_json(text, "config.json", nullptr);
  } catch (const Error&) {
    return;
  }
  stats.accept();
  m.validate();  // throws (and the fuzzer reports it) if an accepted config is invalid
  const ModelConfig back = hf_config_from_json(hf_config_json_text(m), "exported", nullptr);
  if (back.vocab_size != m.vocab_size || back.n_layer != m.n_layer || back.n_head != m.n_head ||
      back.n_embd != m.n_embd || back.block_size != m.block_size || back.dropout != m.dropout)
    std::abort();
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
  if (data[0] & 2) {
    check_hf_config(text, stats);
    return 0;
  }
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
