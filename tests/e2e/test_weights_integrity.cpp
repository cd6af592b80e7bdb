// The integrity of weights files through the ledgerlm binary:
//   - every model.safetensors ledgerlm writes (train, import, export) records each tensor's
//     CRC-32C in __metadata__, beside the format it had ("ledgerlm-weights", HF's "pt");
//   - one flipped byte in a run's weights: eval, sample, export and train --init-from each refuse
//     in one line naming the file and the tensor, export leaves no directory, init-from no run;
//   - a NaN or infinity in a weight (the file intact: its checksum rewritten, or a file without
//     checksums): eval, sample, export (also --lora-only) and train --init-from (a run, a
//     checkpoint) refuse in one line naming the run, the tensor and the first bad element;
//   - a file without checksums (a run written before them, another tool's) loads as before;
//   - an HF export carries checksums and import verifies them.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "model/base/crc32c.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/safetensors_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_error_line;
using testing::ledgerlm;

const testing::ResumeCorpus kCorpus{"weights_integrity_data_",
                                    [] { return testing::lcg_letters(31, 20000); }};

// The "loss ..." line of an eval.
std::string loss_line(const std::string& output) {
  const size_t at = output.rfind("loss ");
  return at == std::string::npos ? "" : output.substr(at, output.find('\n', at) - at);
}

// Every tensor has its checksum record, and the file's other metadata is `format`.
void expect_checksummed(const std::string& path, const std::string& format) {
  const SafeTensorsFile f = SafeTensorsFile::open(path);
  EXPECT_EQ(f.metadata().at("format"), format) << path;
  ASSERT_FALSE(f.tensors().empty()) << path;
  for (const SafeTensorInfo& t : f.tensors()) {
    const auto it = f.metadata().find("checksum." + t.name);
    ASSERT_NE(it, f.metadata().end()) << path << ": no checksum for " << t.name;
    EXPECT_EQ(it->second.rfind("crc32c:", 0), 0u) << it->second;
  }
}

class WeightsIntegrity : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_ = testing::make_temp_dir("weights_integrity_");
    auto r =
        ledgerlm("train" + kCorpus.flags(out_, "base") + " --train.max_steps 4 --ckpt.interval 4");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = ledgerlm("train" + kCorpus.flags(out_, "lora") + " --train.max_steps 2 --init-from " +
                 out_ + "/base --lora.rank 2 --lora.targets qkv --optim.lr 1e-2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = ledgerlm("eval --run " + out_ + "/base");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    base_loss_ = loss_line(r.output);
    ASSERT_FALSE(base_loss_.empty()) << r.output;
  }
  // A copy of run `from` (its config.toml and model.safetensors) as out_/name.
  static std::string copy_run(const std::string& from, const std::string& name) {
    const std::string dir = out_ + "/" + name;
    fs::create_directories(dir);
    fs::copy_file(out_ + "/" + from + "/config.toml", dir + "/config.toml");
    fs::copy_file(out_ + "/" + from + "/model.safetensors", dir + "/model.safetensors");
    return dir;
  }
  // eval, sample and export of `run` each refuse in one line with every needle; the export
  // leaves nothing behind.
  static void expect_readers_refuse(const std::string& run,
                                    std::initializer_list<std::string> needles) {
    SCOPED_TRACE(run);
    expect_one_error_line(ledgerlm("eval --run " + run), needles);
    expect_one_error_line(ledgerlm("sample --run " + run + " --tokens 8 --seed 1"), needles);
    const std::string hf = run + "_hf";
    expect_one_error_line(ledgerlm("export --run " + run + " --out " + hf), needles);
    EXPECT_FALSE(fs::exists(hf));
    for (const auto& e : fs::directory_iterator(out_))
      EXPECT_EQ(e.path().filename().string().rfind(fs::path(hf).filename().string(), 0),
                std::string::npos)
          << "export left " << e.path();
  }
  // train --init-from `from` refuses in one line with every needle and leaves no run behind.
  static void expect_init_from_refused(const std::string& from, const std::string& name,
                                       std::initializer_list<std::string> needles) {
    SCOPED_TRACE(from);
    expect_one_error_line(
        ledgerlm("train" + kCorpus.flags(out_, name) + " --train.max_steps 2 --init-from " + from),
        needles);
    EXPECT_FALSE(fs::exists(out_ + "/" + name));
  }
  static std::string out_, base_loss_;
};
std::string WeightsIntegrity::out_, WeightsIntegrity::base_loss_;

TEST_F(WeightsIntegrity, EveryWeightsFileCarriesChecksums) {
  expect_checksummed(out_ + "/base/model.safetensors", "ledgerlm-weights");
  expect_checksummed(out_ + "/lora/model.safetensors", "ledgerlm-weights");
  // HF export: transformers looks at "format": it stays "pt".
  auto r = ledgerlm("export --run " + out_ + "/base --out " + out_ + "/base_export");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_checksummed(out_ + "/base_export/model.safetensors", "pt");
  // Import writes them too, and verifies the export's on the way in.
  r = ledgerlm("import --format hf --from " + out_ + "/base_export --out " + out_ +
               "/imported --data " + kCorpus.dir());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_checksummed(out_ + "/imported/model.safetensors", "ledgerlm-weights");
  r = ledgerlm("eval --run " + out_ + "/imported");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(loss_line(r.output), base_loss_);
  // A damaged export is refused by import, naming the file and the HF tensor.
  const std::string damaged = out_ + "/base_export/model.safetensors";
  testing::flip_file_byte(damaged,
                          testing::raw_tensor_file_offset(damaged, "transformer.h.1.ln_2.bias", 3));
  r = ledgerlm("import --format hf --from " + out_ + "/base_export --out " + out_ + "/imported2");
  expect_one_error_line(r, {damaged, "'transformer.h.1.ln_2.bias'", "checksum", "damaged"});
  EXPECT_FALSE(fs::exists(out_ + "/imported2"));
}

TEST_F(WeightsIntegrity, FlippedByteIsRefusedByEveryReader) {
  const std::string run = copy_run("base", "flipped");
  const std::string file = run + "/model.safetensors";
  const std::string tensor = "block.1.attn.qkv.weight";
  testing::flip_file_byte(file, testing::raw_tensor_file_offset(file, tensor, 1001));
  const std::initializer_list<std::string> needles = {file, "'" + tensor + "'",
                                                      "fails its checksum", "damaged"};
  expect_readers_refuse(run, needles);
  expect_init_from_refused(run, "from_flipped", needles);
  expect_init_from_refused(file, "from_flipped_file", needles);
  // The byte flipped back: everything reads again, with the base's loss.
  testing::flip_file_byte(file, testing::raw_tensor_file_offset(file, tensor, 1001));
  auto r = ledgerlm("eval --run " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(loss_line(r.output), base_loss_);

  // A flipped bit in the header's checksum record is the same refusal.
  const testing::RawSafetensors raw = testing::raw_safetensors_read(file);
  const std::string record = raw.header["__metadata__"]["checksum.final.lnf.bias"];
  std::string text = testing::read_file(file);
  const size_t at = text.find(record);
  ASSERT_NE(at, std::string::npos);
  text[at + 10] = text[at + 10] == '0' ? '1' : '0';
  ASSERT_TRUE(testing::write_file(file, text));
  expect_one_error_line(ledgerlm("eval --run " + run), {file, "'final.lnf.bias'", "damaged"});
}

TEST_F(WeightsIntegrity, NonFiniteWeightsAreRefused) {
  // A NaN in a file whose checksum is rewritten to match: intact, but unusable.
  const std::string run = copy_run("base", "nan");
  testing::set_f32_element(run + "/model.safetensors", "block.0.mlp.fc.weight", 37,
                           std::numeric_limits<float>::quiet_NaN(), true);
  const std::initializer_list<std::string> needles = {
      "run '" + run + "'", "'block.0.mlp.fc.weight'",
      "nan at element 37 (index [1, 5] of [128, 32])"};
  expect_readers_refuse(run, needles);
  expect_init_from_refused(
      run, "from_nan",
      {run + "/model.safetensors", "'block.0.mlp.fc.weight'", "nan at element 37"});

  // A NaN in a checkpoint whose CRCs (the piece's, meta.json's own) are rewritten to match:
  // --init-from the checkpoint refuses it too.
  const std::string ckpt = out_ + "/nan_ckpt";
  fs::copy(out_ + "/base/ckpt/step_000004", ckpt);
  const std::string model = ckpt + "/model.safetensors";
  testing::set_f32_element(model, "block.1.attn.proj.weight", 3,
                           std::numeric_limits<float>::quiet_NaN(), false);
  nlohmann::json meta = nlohmann::json::parse(testing::read_file(ckpt + "/meta.json"));
  nlohmann::json& pieces =
      meta["files"]["model.safetensors"]["tensors"]["block.1.attn.proj.weight"]["pieces"];
  ASSERT_EQ(pieces.size(), 1u);
  const testing::RawSafetensors raw = testing::raw_safetensors_read(model);
  const int64_t begin = raw.header["block.1.attn.proj.weight"]["data_offsets"][0];
  pieces[0]["crc"] = crc32c_text(crc32c(raw.data.data() + begin, 32 * 32 * 4));
  meta[kCheckpointMetaChecksumKey] = checkpoint_meta_checksum(meta);
  ASSERT_TRUE(testing::write_file(ckpt + "/meta.json", meta.dump(1)));
  expect_init_from_refused(
      ckpt, "from_nan_ckpt",
      {"checkpoint '" + ckpt + "'", "'block.1.attn.proj.weight'", "nan at element 3"});

  // -inf in a file without checksums (as older runs' are).
  const std::string old = copy_run("base", "inf_unchecked");
  testing::strip_checksums(old + "/model.safetensors");
  testing::set_f32_element(old + "/model.safetensors", "embed.wpe", 64,
                           -std::numeric_limits<float>::infinity(), false);
  expect_readers_refuse(old,
                        {"run '" + old + "'", "'embed.wpe'", "-inf at element 64 (index [2, 0]"});

  // In a LoRA run's adapter: eval names the adapter, and export --lora-only refuses it too.
  const std::string lora = copy_run("lora", "lora_nan");
  testing::set_f32_element(lora + "/model.safetensors", "block.1.attn.qkv.lora_b", 5,
                           std::numeric_limits<float>::infinity(), true);
  expect_readers_refuse(lora,
                        {"run '" + lora + "'", "'block.1.attn.qkv.lora_b'", "inf at element 5"});
  expect_one_error_line(ledgerlm("export --run " + lora + " --lora-only --out " + lora + "_peft"),
                        {"run '" + lora + "'", "'block.1.attn.qkv.lora_b'", "inf at element 5"});
  EXPECT_FALSE(fs::exists(lora + "_peft"));
}

TEST_F(WeightsIntegrity, FileWithoutChecksumsStillLoads) {
  const std::string run = copy_run("base", "unchecked");
  testing::strip_checksums(run + "/model.safetensors");
  const SafeTensorsFile f = SafeTensorsFile::open(run + "/model.safetensors");
  for (const auto& [key, value] : f.metadata()) EXPECT_NE(key.rfind("checksum.", 0), 0u) << key;
  auto r = ledgerlm("eval --run " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(loss_line(r.output), base_loss_);
  r = ledgerlm("sample --run " + run + " --tokens 8 --seed 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("export --run " + run + " --out " + run + "_hf");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_checksummed(run + "_hf/model.safetensors", "pt");  // what ledgerlm writes has them
  r = ledgerlm("train" + kCorpus.flags(out_, "from_unchecked") +
               " --train.max_steps 2 --init-from " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_checksummed(out_ + "/from_unchecked/model.safetensors", "ledgerlm-weights");
}

}  // namespace
}  // namespace ledgerlm
