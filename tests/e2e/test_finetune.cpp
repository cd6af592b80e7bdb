// Fine-tuning through the ledgerlm binary: train.freeze and [lora] on top of a base run started
// with --init-from.
//   - frozen tensors come out of training bit for bit as they went in; trained ones move;
//   - checkpoints hold the trained tensors only (model and optimizer files), plus the base's
//     sha256; a resume whose base weights changed is refused in one line;
//   - eval, sample and export of a LoRA run use the merged weights: the export holds no adapter
//     tensors and its adapted weights differ from the base's;
//   - bad freeze patterns and [lora] values get one line each.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_error_line;
using testing::ledgerlm;

const testing::ResumeCorpus kCorpus{"finetune_data_",
                                    [] { return testing::lcg_letters(7, 30000); }};

class Finetune : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    out_ = testing::make_temp_dir("finetune_runs_");
    auto r = ledgerlm("train" + kCorpus.flags(out_, "base") + " --train.max_steps 6");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static std::string base() { return out_ + "/base"; }
  static std::string out_;
};
std::string Finetune::out_;

std::vector<char> tensor_bytes(const SafeTensorsFile& f, const std::string& name) {
  const SafeTensorInfo& info = f.get(name);
  std::vector<char> bytes(static_cast<size_t>(info.bytes));
  f.read_elements(info, 0, info.numel(), bytes.data());
  return bytes;
}

TEST_F(Finetune, FrozenTensorsLeaveTrainingBitForBit) {
  auto r =
      ledgerlm("train" + kCorpus.flags(out_, "frozen") + " --train.max_steps 6 --ckpt.interval 6" +
               " --init-from " + base() + " --train.freeze 'embed.*,block.0.*'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const SafeTensorsFile before = SafeTensorsFile::open(base() + "/model.safetensors");
  const SafeTensorsFile after = SafeTensorsFile::open(out_ + "/frozen/model.safetensors");
  int frozen = 0, moved = 0;
  for (const SafeTensorInfo& t : before.tensors()) {
    const bool is_frozen = t.name.rfind("embed.", 0) == 0 || t.name.rfind("block.0.", 0) == 0;
    const bool same = tensor_bytes(before, t.name) == tensor_bytes(after, t.name);
    if (is_frozen) {
      EXPECT_TRUE(same) << t.name << " is frozen but changed";
      frozen += same;
    } else {
      moved += !same;
    }
  }
  EXPECT_GT(frozen, 0);
  EXPECT_GT(moved, 0) << "no trained tensor moved";
  // The checkpoint holds the trained tensors only, and names the base by hash.
  const std::string ckpt = out_ + "/frozen/ckpt/step_000006";
  const SafeTensorsFile model = SafeTensorsFile::open(ckpt + "/model.safetensors");
  for (const SafeTensorInfo& t : model.tensors())
    EXPECT_FALSE(t.name.rfind("embed.", 0) == 0 || t.name.rfind("block.0.", 0) == 0) << t.name;
  const SafeTensorsFile optim = SafeTensorsFile::open(ckpt + "/optimizer.safetensors");
  for (const SafeTensorInfo& t : optim.tensors())
    EXPECT_FALSE(t.name.rfind("embed.", 0) == 0 || t.name.rfind("block.0.", 0) == 0) << t.name;
  std::ifstream meta_file(ckpt + "/meta.json");
  const nlohmann::json meta = nlohmann::json::parse(meta_file);
  EXPECT_EQ(meta["frozen"]["sha256"].get<std::string>().size(), 64u);
  EXPECT_NE(meta["frozen"]["init_from"].get<std::string>().find("base"), std::string::npos);
  // The start-of-run ledger splits trained and frozen weights.
  EXPECT_NE(r.output.find("params.frozen"), std::string::npos) << r.output;
}

TEST_F(Finetune, ResumeRefusesAChangedBase) {
  const std::string copy = out_ + "/base_copy";
  fs::create_directories(copy);
  fs::copy_file(base() + "/model.safetensors", copy + "/model.safetensors");
  auto r = ledgerlm("train" + kCorpus.flags(out_, "lora_resume") +
                    " --train.max_steps 4 --ckpt.interval 2 --init-from " + copy +
                    " --lora.rank 2 --optim.lr 1e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Unchanged base: the resume goes through.
  r = ledgerlm("train" + kCorpus.flags(out_, "lora_resume") + " --train.max_steps 6 --resume " +
               out_ + "/lora_resume/ckpt/step_000004 --lora.rank 2 --optim.lr 1e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Another base under the same path: refused, naming the hash.
  auto other = ledgerlm("train" + kCorpus.flags(out_, "other_base") + " --train.max_steps 2");
  ASSERT_EQ(other.exit_code, 0) << other.output;
  fs::copy_file(out_ + "/other_base/model.safetensors", copy + "/model.safetensors",
                fs::copy_options::overwrite_existing);
  r = ledgerlm("train" + kCorpus.flags(out_, "lora_resume") + " --train.max_steps 8 --resume auto" +
               " --lora.rank 2 --optim.lr 1e-2");
  expect_one_error_line(r, {"sha256"});
}

TEST_F(Finetune, LoraRunEvaluatesAndExportsMerged) {
  auto r = ledgerlm("train" + kCorpus.flags(out_, "lora") + " --train.max_steps 8 --init-from " +
                    base() + " --lora.rank 4 --lora.targets qkv,mlp_fc --optim.lr 3e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Adapters and nothing else train: N in the ledger is the adapters' count.
  // qkv: A 4 x C + B 3C x 4; mlp_fc: A 4 x C + B 4C x 4; C = 32, two layers.
  EXPECT_NE(r.output.find("N = " + std::to_string(2 * (4 * 32 + 96 * 4 + 4 * 32 + 128 * 4))),
            std::string::npos)
      << r.output;
  auto lora_eval = ledgerlm("eval --run " + out_ + "/lora");
  auto base_eval = ledgerlm("eval --run " + base());
  ASSERT_EQ(lora_eval.exit_code, 0) << lora_eval.output;
  ASSERT_EQ(base_eval.exit_code, 0) << base_eval.output;
  EXPECT_NE(lora_eval.output.substr(lora_eval.output.rfind("loss ")),
            base_eval.output.substr(base_eval.output.rfind("loss ")));
  auto s = ledgerlm("sample --run " + out_ + "/lora --tokens 8 --seed 1");
  EXPECT_EQ(s.exit_code, 0) << s.output;
  auto e = ledgerlm("export --run " + out_ + "/lora --out " + out_ + "/lora_hf");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const SafeTensorsFile hf = SafeTensorsFile::open(out_ + "/lora_hf/model.safetensors");
  for (const SafeTensorInfo& t : hf.tensors())
    EXPECT_EQ(t.name.find("lora"), std::string::npos) << t.name;
  auto eb = ledgerlm("export --run " + base() + " --out " + out_ + "/base_hf");
  ASSERT_EQ(eb.exit_code, 0) << eb.output;
  const SafeTensorsFile hb = SafeTensorsFile::open(out_ + "/base_hf/model.safetensors");
  const std::string qkv = "transformer.h.0.attn.c_attn.weight";
  const std::string proj = "transformer.h.0.attn.c_proj.weight";
  EXPECT_NE(tensor_bytes(hf, qkv), tensor_bytes(hb, qkv)) << "the merge changed nothing";
  EXPECT_EQ(tensor_bytes(hf, proj), tensor_bytes(hb, proj)) << "an unadapted weight changed";

  // The adapters alone, in PEFT's layout: the factors bit for bit under PEFT's names.
  auto peft = ledgerlm("export --run " + out_ + "/lora --lora-only --out " + out_ + "/lora_peft");
  ASSERT_EQ(peft.exit_code, 0) << peft.output;
  const SafeTensorsFile adapter =
      SafeTensorsFile::open(out_ + "/lora_peft/adapter_model.safetensors");
  const SafeTensorsFile run_weights = SafeTensorsFile::open(out_ + "/lora/model.safetensors");
  EXPECT_EQ(adapter.tensors().size(), 8u);  // 2 layers x (qkv, mlp_fc) x (A, B)
  EXPECT_EQ(tensor_bytes(adapter, "base_model.model.transformer.h.1.attn.c_attn.lora_A.weight"),
            tensor_bytes(run_weights, "block.1.attn.qkv.lora_a"));
  EXPECT_EQ(tensor_bytes(adapter, "base_model.model.transformer.h.0.mlp.c_fc.lora_B.weight"),
            tensor_bytes(run_weights, "block.0.mlp.fc.lora_b"));
  std::ifstream config_file(out_ + "/lora_peft/adapter_config.json");
  const nlohmann::json config = nlohmann::json::parse(config_file);
  EXPECT_EQ(config["peft_type"], "LORA");
  EXPECT_EQ(config["r"], 4);
  EXPECT_EQ(config["target_modules"], nlohmann::json({"attn.c_attn", "mlp.c_fc"}));
  EXPECT_EQ(config["fan_in_fan_out"], true);
  expect_one_error_line(
      ledgerlm("export --run " + base() + " --lora-only --out " + out_ + "/base_peft"),
      {"no adapters"});
  EXPECT_FALSE(fs::exists(out_ + "/base_peft"));
}

// q and v's own adapters on a GPT-2 (their row blocks of the fused c_attn): they train and merge
// into c_attn's q and v columns (k's are unchanged), but PEFT has no module for a row block of
// GPT-2's Conv1D c_attn, so --lora-only refuses them in one line, writing nothing.
TEST_F(Finetune, SeparateQvAdaptersOnGpt2MergeButHaveNoPeftModule) {
  auto r = ledgerlm("train" + kCorpus.flags(out_, "lora_qv") + " --train.max_steps 2 --init-from " +
                    base() + " --lora.rank 2 --lora.targets q,v --optim.lr 3e-2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // q: A 2 x C + B C x 2, v the same (every head its own k and v); C = 32, two layers.
  EXPECT_NE(r.output.find("N = " + std::to_string(2 * 2 * (2 * 32 + 32 * 2))), std::string::npos)
      << r.output;
  auto e = ledgerlm("export --run " + out_ + "/lora_qv --out " + out_ + "/lora_qv_hf");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  auto eb = ledgerlm("export --run " + base() + " --out " + out_ + "/base_qv_hf");
  ASSERT_EQ(eb.exit_code, 0) << eb.output;
  // c_attn (C, 3C) in Conv1D layout: column j of row i is output j; q 0..31, k 32..63, v 64..95.
  const SafeTensorsFile hf = SafeTensorsFile::open(out_ + "/lora_qv_hf/model.safetensors");
  const SafeTensorsFile hb = SafeTensorsFile::open(out_ + "/base_qv_hf/model.safetensors");
  const std::vector<float> w = hf.read_f32("transformer.h.0.attn.c_attn.weight"),
                           b = hb.read_f32("transformer.h.0.attn.c_attn.weight");
  int q_changed = 0, k_changed = 0, v_changed = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const size_t col = i % 96;
    int& n = col < 32 ? q_changed : col < 64 ? k_changed : v_changed;
    n += w[i] != b[i];
  }
  EXPECT_GT(q_changed, 0);
  EXPECT_EQ(k_changed, 0) << "k has no adapter";
  EXPECT_GT(v_changed, 0);
  expect_one_error_line(
      ledgerlm("export --run " + out_ + "/lora_qv --lora-only --out " + out_ + "/lora_qv_peft"),
      {"lora.targets 'q'", "c_attn", "qkv"});
  EXPECT_FALSE(fs::exists(out_ + "/lora_qv_peft"));
  // A run whose config names an adapter its weights lack (here k) is refused naming the tensor,
  // rather than evaluated without it.
  const std::string copy = out_ + "/lora_qv_k";
  fs::copy(out_ + "/lora_qv", copy);
  std::string toml = testing::read_file(copy + "/config.toml");
  const size_t at = toml.find("targets = \"q,v\"");
  ASSERT_NE(at, std::string::npos) << toml;
  toml.replace(at, std::string("targets = \"q,v\"").size(), "targets = \"q,k,v\"");
  testing::write_file(copy + "/config.toml", toml);
  expect_one_error_line(ledgerlm("eval --run " + copy), {"block.0.attn.k.lora_a"});
}

TEST_F(Finetune, BadFreezeAndLoraValuesAreOneLine) {
  const std::string one = " --train.max_steps 1";
  expect_one_error_line(
      ledgerlm("train" + kCorpus.flags(out_, "bad1") + one + " --train.freeze 'blok.*'"),
      {"blok.*"});
  expect_one_error_line(
      ledgerlm("train" + kCorpus.flags(out_, "bad2") + one + " --train.freeze '*'"),
      {"nothing would train"});
  expect_one_error_line(ledgerlm("train" + kCorpus.flags(out_, "bad3") + one + " --lora.rank 4096"),
                        {"lora.rank"});
  expect_one_error_line(ledgerlm("train" + kCorpus.flags(out_, "bad4") + one +
                                 " --lora.rank 2 --lora.targets qkv,wte"),
                        {"wte"});
  expect_one_error_line(
      ledgerlm("train" + kCorpus.flags(out_, "bad5") + one + " --lora.rank 2 --lora.alpha 0"),
      {"lora.alpha"});
  for (const char* name : {"bad1", "bad2", "bad3", "bad4", "bad5"})
    EXPECT_FALSE(fs::exists(out_ + "/" + name)) << name << ": a refused start left its directory";
}

}  // namespace
}  // namespace ledgerlm
