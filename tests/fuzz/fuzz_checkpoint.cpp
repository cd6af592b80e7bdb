// Fuzz target: a checkpoint directory as CheckpointReader::open sees it (ckpt/checkpoint.h) —
// meta.json (format, version, its own checksum, the per-file tensor records and the pieces that
// must tile each tensor, with their CRCs) and its data files — plus the config it carries
// (config_toml, read by the typed config loader). An input packs meta.json, model.safetensors and
// optimizer.safetensors, separated by fuzz::kPartSeparator, after one mode byte: with bit 0 set,
// a meta.json that parses gets its checksum recomputed, so mutations reach the checks behind it.
// Accepted: the checkpoint opened, every CRC verified, every tensor read, the config loaded.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "model/base/check.h"
#include "tests/fuzz/fuzz_support.h"
#include "train/config/config_file.h"
#include "train/config/config_keys.h"

namespace {

// meta.json with a correct checksum when it parses as an object (mode bit 0), else as given.
std::string sealed(const std::string& text) {
  nlohmann::json meta = nlohmann::json::parse(text, nullptr, false);
  if (!meta.is_object()) return text;
  meta[ledgerlm::kCheckpointMetaChecksumKey] = ledgerlm::checkpoint_meta_checksum(meta);
  return meta.dump(1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ledgerlm;
  static fuzz::Stats stats("fuzz_checkpoint");
  static fuzz::Scratch scratch;
  if (size == 0) return 0;
  stats.input();
  const std::vector<std::string> parts = fuzz::split_parts(data + 1, size - 1, 3);
  const char* names[] = {"meta.json", "model.safetensors", "optimizer.safetensors"};
  for (size_t i = 0; i < 3; ++i) {
    if (i >= parts.size()) {
      scratch.remove(names[i]);
    } else {
      scratch.write(names[i], i == 0 && (data[0] & 1) ? sealed(parts[0]) : parts[i]);
    }
  }
  try {
    CheckpointReader r = CheckpointReader::open(scratch.dir());
    r.verify_all();
    for (const char* file : {"model", "optimizer"})
      for (const std::string& name : r.tensor_names(file)) {
        const SafeTensorInfo& info = r.info(file, name);
        std::vector<char> buf(static_cast<size_t>(info.bytes));
        r.read(file, name, info.dtype, info.shape, 0, info.numel(), buf.data());
      }
    const nlohmann::json& toml =
        r.meta().contains("config_toml") ? r.meta()["config_toml"] : nlohmann::json();
    if (toml.is_string()) {
      RunConfig config;
      config_load_toml(toml.get<std::string>(), "config_toml", config_keys(config));
    }
    stats.accept();
  } catch (const Error&) {
    // Rejected with a message naming the file.
  }
  return 0;
}
