// Writes the committed seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): small,
// VALID inputs of every kind each target parses, made with ledgerlm's own writers so they are
// exactly what ledgerlm writes. Run from the source root after a format change:
//   build-fuzz/tests/fuzz/fuzz_make_seeds tests/fuzz/corpus
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/hf_export.h"
#include "ckpt/safetensors.h"
#include "data/meta.h"
#include "data/shard.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/support/bytes_data_test_support.h"
#include "train/config/config_keys.h"

namespace {

namespace fs = std::filesystem;
using namespace ledgerlm;

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void put(const std::string& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir + "/" + name, std::ios::binary | std::ios::trunc) << bytes;
  std::printf("%s/%s (%zu bytes)\n", dir.c_str(), name.c_str(), bytes.size());
}

std::string temp_dir() {
  std::string templ = "/tmp/ledgerlm_seeds_XXXXXX";
  return ::mkdtemp(templ.data());
}

// A safetensors file with its "checksum.*" metadata removed (the data section as it was).
std::string without_checksums(const std::string& file) {
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  nlohmann::json header = nlohmann::json::parse(file.substr(8, n));
  nlohmann::json& md = header["__metadata__"];
  for (auto it = md.begin(); it != md.end();)
    it = it.key().rfind(kSafetensorsChecksumPrefix, 0) == 0 ? md.erase(it) : std::next(it);
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  return std::string(reinterpret_cast<const char*>(&len), 8) + text + file.substr(8 + n);
}

void safetensors_seeds(const std::string& out) {
  const std::string tmp = temp_dir();
  const std::vector<float> f32 = {1.0f, -2.5f, 3.25f, 0.0f, 1e-3f, 7.0f};
  const std::vector<double> f64 = {1.5, -2.0};
  const std::vector<uint16_t> half = {0x3f80, 0xbf80, 0x4000, 0x0000};  // bf16 1, -1, 2, 0
  const std::vector<uint8_t> codes = {0, 1, 127, 128, 255};
  const std::vector<int32_t> ints = {-7, 42};
  SafeTensorsWriter all;
  all.add("w", DType::kF32, {2, 3}, f32.data());
  all.add("d", DType::kF64, {2}, f64.data());
  all.add("b", DType::kBF16, {4}, half.data());
  all.add("h", DType::kF16, {2, 2}, half.data());
  all.add("codes", DType::kU8, {5}, codes.data());
  all.add("i", DType::kI32, {2}, ints.data());
  all.add("u", DType::kU16, {1, 4}, half.data());
  all.set_metadata("format", "ledgerlm-weights");
  all.write_atomic(tmp + "/all.safetensors");
  put(out, "all_dtypes", slurp(tmp + "/all.safetensors"));
  SafeTensorsWriter empty;
  empty.add("nothing", DType::kF32, {0, 4}, nullptr);
  empty.write_atomic(tmp + "/empty.safetensors");
  put(out, "zero_sized_tensor", slurp(tmp + "/empty.safetensors"));
  // The same tensors without the checksum records: a file from before them, or another tool's.
  put(out, "all_dtypes_no_checksums", without_checksums(slurp(tmp + "/all.safetensors")));
  // An HF export ({"format": "pt"} and the checksums), as `export --format hf` writes one.
  hf_write_safetensors(tmp + "/hf.safetensors",
                       {{"transformer.wte.weight", {3, 2}, {0.5f, -1.0f, 2.0f, 0.0f, 3.5f, -0.25f}},
                        {"transformer.ln_f.bias", {2}, {1.0f, -1.0f}}});
  put(out, "hf_export", slurp(tmp + "/hf.safetensors"));
  fs::remove_all(tmp);
}

void checkpoint_seeds(const std::string& out) {
  const std::string tmp = temp_dir();
  std::vector<float> w(6 * 5);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i);
  const std::vector<uint8_t> codes(37, 9);
  const std::vector<uint16_t> half(9, 0x3f80);
  const std::vector<CkptPiece> pieces = {
      {"model", "w", DType::kF32, {6, 5}, 0, 12, w.data(), {}},
      {"model", "w", DType::kF32, {6, 5}, 12, 18, w.data() + 12, {}},
      {"model", "half", DType::kBF16, {9}, 0, 9, half.data(), {}},
      {"optimizer", "w.codes.m", DType::kU8, {37}, 0, 37, codes.data(), {}},
  };
  RunConfig config;
  const nlohmann::json meta = {{"trainer", {{"step", 3}, {"tokens_seen", 96}}},
                               {"loss_scaler", {{"enabled", false}}},
                               {"config_toml", config_to_toml(config_keys(config))}};
  const std::string dir = checkpoint_save(tmp + "/ckpt", 3, meta, pieces).dir;
  const std::vector<std::string> files = {slurp(dir + "/meta.json"),
                                          slurp(dir + "/model.safetensors"),
                                          slurp(dir + "/optimizer.safetensors")};
  put(out, "checkpoint_as_written", std::string(1, '\0') + fuzz::join_parts(files));
  put(out, "checkpoint_sealed", std::string(1, '\1') + fuzz::join_parts(files));
  // A model-only checkpoint, and a version 1 one (before meta.json had its checksum).
  const std::string only =
      checkpoint_save(tmp + "/only", 1, {{"trainer", {{"step", 1}}}}, {pieces[2]}).dir;
  put(out, "model_only",
      std::string(1, '\0') +
          fuzz::join_parts({slurp(only + "/meta.json"), slurp(only + "/model.safetensors")}));
  nlohmann::json v1 = nlohmann::json::parse(files[0]);
  v1.erase(kCheckpointMetaChecksumKey);
  v1["format_version"] = 1;
  put(out, "format_version_1",
      std::string(1, '\0') + fuzz::join_parts({v1.dump(1), files[1], files[2]}));
  fs::remove_all(tmp);
}

void config_seeds(const std::string& out, const std::string& source_root) {
  for (const auto& e : fs::directory_iterator(source_root + "/configs"))
    if (e.path().extension() == ".toml")
      put(out, e.path().stem().string(), std::string(1, '\0') + slurp(e.path().string()));
  RunConfig config;
  put(out, "resolved_defaults", std::string(1, '\0') + config_to_toml(config_keys(config)));
  config.data.dir = "/data/d a#t \"q\" \\ \xE4\xB8\xAD\t";
  config.train.out_dir = "runs #1";
  config.optim.lr = 1.25e-4;
  put(out, "resolved_strings", std::string(1, '\0') + config_to_toml(config_keys(config)));
  put(out, "flags",
      std::string(1, '\1') +
          "train.max_steps=10\noptim.lr=3e-3\ntrain.overwrite=true\n"
          "data.dir=d a#t\nmodel.n_layer=1e1\n");
  // Hugging Face GPT-2 config.json (mode byte 2): as transformers saves one, and as export
  // writes one.
  put(out, "hf_config_transformers",
      std::string(1, '\2') +
          slurp(source_root + "/tests/reference/fixtures/hf_gpt2_tiny/config.json"));
  put(out, "hf_config_export",
      std::string(1, '\2') + hf_config_json_text(ModelConfig{257, 2, 2, 32, 32, 0.1, "none", {}}));
}

void data_seeds(const std::string& out) {
  const std::string tmp = temp_dir();
  const std::vector<int32_t> train = ledgerlm::testing::tiny_bytes_train();
  const std::vector<int32_t> val = ledgerlm::testing::tiny_bytes_val();
  DataMeta meta = ledgerlm::testing::tiny_bytes_shards(tmp, 295);
  meta_write(tmp + "/meta.json", meta);
  put(out, "bytes_data",
      fuzz::join_parts(
          {slurp(tmp + "/meta.json"), slurp(tmp + "/train.bin"), slurp(tmp + "/val.bin")}));
  // The same tokens in 16-byte checksum blocks: tables of 33 and 5 CRCs in a small input.
  shard_write(tmp + "/train.bin", train, 257, 16);
  shard_write(tmp + "/val.bin", val, 257, 16);
  put(out, "bytes_data_small_blocks",
      fuzz::join_parts(
          {slurp(tmp + "/meta.json"), slurp(tmp + "/train.bin"), slurp(tmp + "/val.bin")}));
  shard_write(tmp + "/train.bin", train, 257);
  shard_write(tmp + "/val.bin", val, 257);
  std::vector<int32_t> none;
  shard_write(tmp + "/val.bin", none, 257);
  meta.val = {0, 0, 0};
  meta.val_fraction = 0.0;
  meta_write(tmp + "/meta.json", meta);
  put(out, "bytes_data_no_val",
      fuzz::join_parts(
          {slurp(tmp + "/meta.json"), slurp(tmp + "/train.bin"), slurp(tmp + "/val.bin")}));
  // With a test split (prepare --test-fraction): meta.json's test keys and a fourth part.
  shard_write(tmp + "/val.bin", val, 257);
  ledgerlm::testing::tiny_bytes_test_split(tmp, meta);
  meta.val = {40, 39, 1};
  meta.val_fraction = 0.1;
  meta_write(tmp + "/meta.json", meta);
  put(out, "bytes_data_test_split",
      fuzz::join_parts({slurp(tmp + "/meta.json"), slurp(tmp + "/train.bin"),
                        slurp(tmp + "/val.bin"), slurp(tmp + "/test.bin")}));
  fs::remove_all(tmp);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "tests/fuzz/corpus";
  const std::string root = argc > 2 ? argv[2] : ".";
  safetensors_seeds(out + "/safetensors");
  checkpoint_seeds(out + "/checkpoint");
  config_seeds(out + "/config", root);
  data_seeds(out + "/data");
  return 0;
}
