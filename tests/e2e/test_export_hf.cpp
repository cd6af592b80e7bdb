// `ledgerlm export --format hf` end to end: train a tiny run (bytes tokenizer, vocab 257 padded
// to 320), export it, check the tensor names and shapes against Hugging Face GPT-2's naming, load
// the export with tests/reference's own safetensors reader into the PyTorch reference model and
// reproduce our logits. Also: --out that exists and an unknown --format are refused. The
// exported tokenizers (bytes here, bpe in ExportHfBpe) are read by
// tests/tools/hf_tokenizer_read.py, which encodes as transformers' AutoTokenizer does, and must
// give exactly ledgerlm's ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "data/tokenizer.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "tests/support/test_util.h"
#include "train/run/loaded_run.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

constexpr int64_t kLayers = 2, kEmbd = 32, kCtx = 32, kVocab = 257;

class ExportHf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::make_temp_dir("export_hf_"));
    std::string text;
    for (int i = 0; i < 3000; ++i) text += "in the beginning " + std::to_string(i % 97) + "\n";
    testing::write_file(*dir_ + "/corpus.txt", text);
    auto r = run_command(testing::ledgerlm_binary() + " prepare --input " + *dir_ +
                         "/corpus.txt --out " + *dir_ + "/data --tokenizer bytes");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(testing::ledgerlm_binary() + " train --data.dir " + *dir_ +
                    "/data --train.out_dir " + *dir_ +
                    " --train.name run --model.n_layer 2"
                    " --model.n_head 2 --model.n_embd 32 --model.block_size 32 --train.seq_len 32"
                    " --train.micro_batch 4 --train.max_steps 5 --train.eval_windows 4"
                    " --train.threads 1 --optim.lr 0.01");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(testing::ledgerlm_binary() + " export --run " + *dir_ +
                    "/run --format hf --out " + *dir_ + "/hf");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string* dir_;
};
std::string* ExportHf::dir_ = nullptr;

// GPT-2's names and (Conv1D) shapes, written out from the Hugging Face model layout.
std::map<std::string, std::vector<int64_t>> gpt2_expected() {
  const int64_t C = kEmbd;
  std::map<std::string, std::vector<int64_t>> e = {{"transformer.wte.weight", {kVocab, C}},
                                                   {"transformer.wpe.weight", {kCtx, C}},
                                                   {"transformer.ln_f.weight", {C}},
                                                   {"transformer.ln_f.bias", {C}}};
  for (int64_t l = 0; l < kLayers; ++l) {
    const std::string h = "transformer.h." + std::to_string(l) + ".";
    e[h + "ln_1.weight"] = {C};
    e[h + "ln_1.bias"] = {C};
    e[h + "attn.c_attn.weight"] = {C, 3 * C};
    e[h + "attn.c_attn.bias"] = {3 * C};
    e[h + "attn.c_proj.weight"] = {C, C};
    e[h + "attn.c_proj.bias"] = {C};
    e[h + "ln_2.weight"] = {C};
    e[h + "ln_2.bias"] = {C};
    e[h + "mlp.c_fc.weight"] = {C, 4 * C};
    e[h + "mlp.c_fc.bias"] = {4 * C};
    e[h + "mlp.c_proj.weight"] = {4 * C, C};
    e[h + "mlp.c_proj.bias"] = {C};
  }
  return e;
}

TEST_F(ExportHf, NamesShapesConfigAndTokenizer) {
  const std::string hf = *dir_ + "/hf";
  SafeTensorsFile f = SafeTensorsFile::open(hf + "/model.safetensors");
  std::map<std::string, std::vector<int64_t>> got;
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(t.dtype, DType::kF32) << t.name;
    got[t.name] = t.shape;
  }
  EXPECT_EQ(got, gpt2_expected());
  EXPECT_EQ(f.metadata().at("format"), "pt");
  auto cfg = nlohmann::json::parse(testing::read_file(hf + "/config.json"));
  EXPECT_EQ(cfg["architectures"][0], "GPT2LMHeadModel");
  EXPECT_EQ(cfg["vocab_size"], kVocab);
  EXPECT_EQ(cfg["n_layer"], kLayers);
  EXPECT_EQ(cfg["n_positions"], kCtx);
  EXPECT_EQ(cfg["eos_token_id"], 256);
  auto tok = nlohmann::json::parse(testing::read_file(hf + "/tokenizer.json"));
  EXPECT_EQ(tok["model"]["vocab"].size(), 257u);
  EXPECT_EQ(tok["model"]["vocab"]["a"], 97);  // printable bytes map to themselves
  EXPECT_EQ(tok["model"]["vocab"]["<|endoftext|>"], 256);
  EXPECT_TRUE(tok["added_tokens"].empty());  // so the literal text is bytes, as ledgerlm has it
  auto tok_cfg = nlohmann::json::parse(testing::read_file(hf + "/tokenizer_config.json"));
  EXPECT_EQ(tok_cfg["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(tok_cfg["eos_token"], "<|endoftext|>");
  EXPECT_EQ(tok_cfg["split_special_tokens"], true);
  EXPECT_FALSE(fs::exists(*dir_ + "/hf.tmp"));
}

// Encodes `texts` with tests/tools/hf_tokenizer_read.py (AutoTokenizer's behaviour, modelled
// independently of ledgerlm's writer) on the tokenizer files in `hf`: per text, ids and decode.
std::vector<std::pair<std::vector<int32_t>, std::string>> hf_read(
    const std::string& hf, const std::vector<std::string>& texts, const std::string& scratch) {
  testing::write_file(scratch + "/texts.json", nlohmann::json(texts).dump());
  auto r = run_command(testing::python3() + " " + testing::source_dir() +
                       "/tests/tools/hf_tokenizer_read.py " + hf + " " + scratch +
                       "/texts.json > " + scratch + "/read.json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::pair<std::vector<int32_t>, std::string>> out;
  if (r.exit_code != 0) return out;
  for (const auto& e : nlohmann::json::parse(testing::read_file(scratch + "/read.json")))
    out.emplace_back(e["ids"].get<std::vector<int32_t>>(), e["decoded"].get<std::string>());
  return out;
}

TEST_F(ExportHf, BytesTokenizerJsonGivesTheByteIds) {
  // Every byte is its own id; the eot's text is bytes too, as ledgerlm's bytes tokenizer has it.
  const std::vector<std::string> texts = {
      "in the beginning 42\n", "tabs\t\tand  spaces   \r\n\n",
      "\xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80 caf\xc3\xa9 \xe2\x96\x81 \xc4\xa0\xc4\x8a",
      std::string("nul\0 del\x7f <|endoftext|> <unk>", 29), ""};
  auto got = hf_read(*dir_ + "/hf", texts, *dir_);
  ASSERT_EQ(got.size(), texts.size());
  for (size_t i = 0; i < texts.size(); ++i) {
    std::vector<int32_t> want(texts[i].begin(), texts[i].end());
    for (auto& b : want) b &= 0xff;
    EXPECT_EQ(got[i].first, want) << "text " << i;
    EXPECT_EQ(got[i].second, texts[i]) << "text " << i;
  }
}

TEST_F(ExportHf, ReferenceReproducesOurLogits) {
  const std::string hf = *dir_ + "/hf";
  const int64_t B = 2, T = 16;
  std::vector<int32_t> tokens(static_cast<size_t>(B * T));
  std::mt19937 rng(7);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % kVocab);
  SafeTensorsWriter w;
  w.add("tokens", DType::kI32, {B, T}, tokens.data());
  w.write_atomic(*dir_ + "/batch.safetensors");
  const std::string out = *dir_ + "/ref_out.safetensors";
  auto r = run_command("OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE " +
                       testing::python3() + " " + testing::source_dir() +
                       "/tests/reference/gpt_ref.py --config " + hf + "/config.json --weights " +
                       hf + "/model.safetensors --batch " + *dir_ + "/batch.safetensors --out " +
                       out + " --logits --no-grads");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<float> ref = SafeTensorsFile::open(out).read_f32("logits");
  ASSERT_EQ(ref.size(), static_cast<size_t>(B * T * kVocab));

  // Our logits from the run's own weights (not the export).
  auto backend = backend_create_cpu(1);
  LoadedRun run = run_load(*dir_ + "/run", *backend);
  GptModel model(run.config.model, run.table, *backend, DType::kF32, DType::kF32);
  model.plan(B, T);
  ForwardOptions fo;
  fo.training = false;
  model.forward(run.params_tensor(), tokens.data(), nullptr, B, T, fo);
  Tensor logits = model.logits();
  const int64_t Vp = run.config.model.padded_vocab();
  std::vector<float> ours(ref.size());
  for (int64_t i = 0; i < B * T; ++i)
    for (int64_t v = 0; v < kVocab; ++v) ours[i * kVocab + v] = logits.as<float>()[i * Vp + v];
  // Two fp32 implementations summing in different orders: per tensor
  // max|a-b| <= 1e-5 + 1e-4 * max|ref| (the model issue's tolerance; measured ~3e-7 relative).
  auto c = testing::compare_tensor("logits", ours.data(), ref.data(),
                                   static_cast<int64_t>(ref.size()), 1e-5, 1e-4);
  EXPECT_TRUE(c.ok) << c.message;
}

TEST_F(ExportHf, RefusesExistingOutAndUnknownFormat) {
  auto r = run_command(testing::ledgerlm_binary() + " export --run " + *dir_ + "/run --out " +
                       *dir_ + "/hf");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("already exists"), std::string::npos) << r.output;
  r = run_command(testing::ledgerlm_binary() + " export --run " + *dir_ +
                  "/run --format onnx --out " + *dir_ + "/x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("expected hf"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(*dir_ + "/x"));
}

// A run on a bpe tokenizer ledgerlm trained (tests/reference/fixtures/spm_bpe, written by
// tests/reference/gen_spm_tokenizer_fixture.py with the ids transformers' AutoTokenizer gave on
// the export of a run on it). Before, the export held tokenizer.model only and AutoTokenizer
// loaded a GPT2Tokenizer with other ids.
class ExportHfBpe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::make_temp_dir("export_hf_bpe_"));
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "And God said, Let there be light " + std::to_string(i) + "\n";
    testing::write_file(*dir_ + "/corpus.txt", text);
    auto r = run_command(testing::ledgerlm_binary() + " prepare --input " + *dir_ +
                         "/corpus.txt --out " + *dir_ + "/data --tokenizer from:" + fixture());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(testing::ledgerlm_binary() + " train --data.dir " + *dir_ +
                    "/data --train.out_dir " + *dir_ +
                    " --train.name run --model.n_layer 1 --model.n_head 1 --model.n_embd 16"
                    " --model.block_size 16 --train.seq_len 16 --train.micro_batch 2"
                    " --train.max_steps 1 --train.eval_windows 1 --train.threads 1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command(testing::ledgerlm_binary() + " export --run " + *dir_ +
                    "/run --format hf --out " + *dir_ + "/hf");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string fixture() {
    return testing::source_dir() + "/tests/reference/fixtures/spm_bpe";
  }
  static std::string* dir_;
};
std::string* ExportHfBpe::dir_ = nullptr;

TEST_F(ExportHfBpe, TokenizerGivesAutoTokenizersIdsOnHardText) {
  const std::string hf = *dir_ + "/hf";
  auto cfg = nlohmann::json::parse(testing::read_file(hf + "/tokenizer_config.json"));
  EXPECT_EQ(cfg["tokenizer_class"], "PreTrainedTokenizerFast");
  EXPECT_EQ(cfg["eos_token"], "<|endoftext|>");
  EXPECT_EQ(cfg["unk_token"], "<unk>");
  EXPECT_EQ(cfg["model_max_length"], 16);
  EXPECT_TRUE(fs::exists(hf + "/tokenizer.model"));

  const auto expected = nlohmann::json::parse(testing::read_file(fixture() + "/expected.json"));
  std::vector<std::string> texts;
  for (const auto& c : expected["cases"]) texts.push_back(c["text"].get<std::string>());
  auto got = hf_read(hf, texts, *dir_);
  ASSERT_EQ(got.size(), texts.size());
  auto ours = tokenizer_load(*dir_ + "/data");
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& c = expected["cases"][i];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    // AutoTokenizer's ids (when the fixture was written) are the ids ledgerlm trains on ...
    EXPECT_EQ(ours->encode(texts[i]), want) << c["name"];
    // ... and the exported tokenizer.json gives them, and decodes them back to the text.
    EXPECT_EQ(got[i].first, want) << c["name"];
    EXPECT_EQ(got[i].second, texts[i]) << c["name"];
  }
}

}  // namespace
}  // namespace ledgerlm
