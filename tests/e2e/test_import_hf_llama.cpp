// `ledgerlm import --format hf` and `export --format hf` of LlamaForCausalLM and Qwen2ForCausalLM,
// on tests/reference/fixtures/hf_llama_tiny (grouped-query attention: 4 heads, 2 kv heads; an
// untied head; vocab 600 padded to 640) and hf_qwen2_tiny (q/k/v biases, tied head, an embedding
// of 640 rows for a tokenizer of 603 ids, sharded with model.safetensors.index.json), both made by
// tests/reference/gen_hf_llama_fixture.py:
//   - ledgerlm's logits at every position equal transformers' (fp64) to fp32 rounding;
//   - a swapped kv head or rotary pairs taken in the other convention move them far past that;
//   - export gives the fixture's tensors back bit for bit and a config.json of the same class;
//   - bf16 and fp16 files import to their values; every refusal is one line naming the key;
//   - a padded embedding takes its own tokenizer's data; LoRA on Llama's module names exports the
//     adapter tensors PEFT itself writes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "tests/support/hf_model_test_support.h"
#include "tests/support/test_util.h"
#include "train/run/loaded_run.h"

namespace ledgerlm {
namespace {

using namespace testing::hf_test_names;

std::string fixture(const std::string& name) {
  return testing::source_dir() + "/tests/reference/fixtures/" + name;
}

// Every tensor of a model directory (model.safetensors or its shards).
std::map<std::string, RawTensor> read_model(const std::string& dir) {
  std::map<std::string, RawTensor> all;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors" &&
        e.path().filename().string().rfind("model", 0) == 0)  // not logits.safetensors
      all.merge(read_raw(e.path().string()));
  return all;
}

class ImportHfLlama : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::make_temp_dir("import_hf_llama_"));
    for (const char* name : {"hf_llama_tiny", "hf_qwen2_tiny"}) {
      const auto r = import(fixture(name), name);
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }
  static void TearDownTestSuite() { delete dir_; }

  static testing::CommandResult import(const std::string& model_dir, const std::string& run) {
    return ledgerlm("import --format hf --from " + model_dir + " --out " + *dir_ + "/runs/" + run);
  }
  // A copy of fixture `name` as one model.safetensors (shards merged), for a test to change.
  static std::string copy_fixture(const std::string& name, const std::string& as) {
    const std::string dst = *dir_ + "/" + as;
    fs::create_directories(dst);
    fs::copy_file(fixture(name) + "/config.json", dst + "/config.json");
    write_raw(dst + "/model.safetensors", read_model(fixture(name)));
    return dst;
  }
  static bool nothing_left(const std::string& run) { return testing::nothing_left(*dir_, run); }

  // The largest |ledgerlm - transformers| over every logit of the fixture's ids, with the run
  // `run` (imported from fixture `name`), and the largest |transformers| logit.
  static std::pair<double, double> logits_error(const std::string& run, const std::string& name) {
    const SafeTensorsFile ref = SafeTensorsFile::open(fixture(name) + "/logits.safetensors");
    const std::vector<int64_t> shape = ref.get("logits").shape;  // [B, T, V]
    const int64_t B = shape[0], T = shape[1], V = shape[2];
    std::vector<int32_t> tokens(static_cast<size_t>(B * T));
    ref.read("input_ids", tokens.data(), DType::kI32, {B, T});
    std::vector<float> want(static_cast<size_t>(B * T * V));
    ref.read("logits", want.data(), DType::kF32, shape);
    auto backend = backend_create_cpu(1);
    LoadedRun loaded = run_load_model(*dir_ + "/runs/" + run, *backend);
    EXPECT_EQ(loaded.config.model.vocab_size, V);
    GptModel model(loaded.config.model, loaded.table, *backend, DType::kF32, DType::kF32);
    model.plan(B, T);
    ForwardOptions fo;
    fo.training = false;
    model.forward(loaded.params_tensor(), tokens.data(), nullptr, B, T, fo);
    const int64_t PV = loaded.config.model.padded_vocab();
    std::vector<float> logits(static_cast<size_t>(B * T * PV));
    backend->copy_to_host(logits.data(), model.logits(), B * T * PV);
    double err = 0, top = 0;
    for (int64_t n = 0; n < B * T; ++n)
      for (int64_t v = 0; v < V; ++v) {
        const double w = want[static_cast<size_t>(n * V + v)];
        err = std::max(err, std::abs(logits[static_cast<size_t>(n * PV + v)] - w));
        top = std::max(top, std::abs(w));
      }
    return {err, top};
  }

  static std::string* dir_;
};
std::string* ImportHfLlama::dir_ = nullptr;

// Logits of up to 7 in magnitude, through 2 blocks of weights drawn large (sharp attention,
// products of norm weights up to ~2): fp32 rounding compounds to some 1e-5. transformers' own
// fp32 forward is 5.6e-6 (Llama) and 1.5e-5 (Qwen2) from its fp64 one (recorded in the
// fixtures' metadata); the bound is 4x the larger, ~125 ulps of the largest logit. A mapping error
// moves the logits by more than 1 (SwappedKvHeadOrRotaryConventionMovesTheLogits). The
// reference logits are the fp64 ones rounded to fp32 (at most 2.4e-7 here).
constexpr double kLogitTolerance = 6e-5;

TEST_F(ImportHfLlama, LogitsMatchTransformersAtEveryPosition) {
  for (const char* name : {"hf_llama_tiny", "hf_qwen2_tiny"}) {
    const auto [err, top] = logits_error(name, name);
    EXPECT_LT(err, kLogitTolerance) << name;
    EXPECT_GT(top, 1.0) << name;  // the fixture's logits have structure
    std::printf("%s: max |logit - transformers fp64| = %.3g (largest logit %.3g)\n", name, err,
                top);
  }
}

// A long context (SmolLM2's 8192, Qwen2.5's 32768) is the model's block_size; eval's windows
// (train.seq_len) stay at 1024 so that its forwards fit.
TEST_F(ImportHfLlama, LongContextKeepsEvalWindowsAt1024) {
  const std::string dir = copy_fixture("hf_llama_tiny", "long");
  testing::edit_config_json(dir, [](json& c) { c["max_position_embeddings"] = 8192; });
  const auto r = import(dir, "long");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string toml = testing::read_file(*dir_ + "/runs/long/config.toml");
  EXPECT_NE(toml.find("block_size = 8192"), std::string::npos) << toml;
  EXPECT_NE(toml.find("seq_len = 1024"), std::string::npos) << toml;
}

TEST_F(ImportHfLlama, RunConfigHoldsTheBlockKeys) {
  const std::string toml = testing::read_file(*dir_ + "/runs/hf_llama_tiny/config.toml");
  for (const char* line :
       {"vocab_size = 600", "n_layer = 2", "n_head = 4", "n_embd = 24", "block_size = 32",
        "ffn_hidden = 48", "mlp = \"swiglu\"", "position = \"rope\"", "rope_theta = 500",
        "n_kv_head = 2", "norm = \"rmsnorm\"", "bias = false", "tie_embeddings = false"})
    EXPECT_NE(toml.find(line), std::string::npos) << line << " in\n" << toml;
  const std::string qwen = testing::read_file(*dir_ + "/runs/hf_qwen2_tiny/config.toml");
  for (const char* line :
       {"vocab_size = 640", "qkv_bias = true", "tie_embeddings = true", "norm_eps = 1e-06"})
    EXPECT_NE(qwen.find(line), std::string::npos) << line << " in\n" << qwen;
}

// The fixtures are sharp enough that the head mapping and the rotary convention matter: a copy
// with k_proj's two kv heads swapped, or with q_proj's and k_proj's rows of every head reordered
// from the half-split pairs (i, i + hd/2) to the interleaved ones (2i, 2i + 1) — what a reader
// with the other convention would compute — moves the logits by far more than the tolerance.
TEST_F(ImportHfLlama, SwappedKvHeadOrRotaryConventionMovesTheLogits) {
  const int64_t hd = 6, cols = 24;
  const size_t row = static_cast<size_t>(cols) * sizeof(float);
  auto swap_heads = [&](std::map<std::string, RawTensor>& t) {
    RawTensor& k = t.at("model.layers.0.self_attn.k_proj.weight");  // (2 x 6, 24)
    for (int64_t r = 0; r < hd; ++r)
      std::swap_ranges(k.bytes.begin() + static_cast<int64_t>(r * row),
                       k.bytes.begin() + static_cast<int64_t>((r + 1) * row),
                       k.bytes.begin() + static_cast<int64_t>((r + hd) * row));
  };
  auto interleave = [&](std::map<std::string, RawTensor>& t) {
    for (const char* m : {"q_proj", "k_proj"})
      for (int l = 0; l < 2; ++l) {
        RawTensor& w = t.at("model.layers." + std::to_string(l) + ".self_attn." + m + ".weight");
        const std::vector<char> old = w.bytes;
        const int64_t heads = w.shape[0] / hd;
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t i = 0; i < hd; ++i) {  // new row 2j(+1) <- old row j (+ hd/2)
            const int64_t from = h * hd + (i % 2 == 0 ? i / 2 : i / 2 + hd / 2);
            std::copy(old.begin() + static_cast<int64_t>(from * row),
                      old.begin() + static_cast<int64_t>((from + 1) * row),
                      w.bytes.begin() + static_cast<int64_t>((h * hd + i) * row));
          }
      }
  };
  for (const auto& [as, edit] :
       std::vector<std::pair<std::string, std::function<void(std::map<std::string, RawTensor>&)>>>{
           {"swapped", swap_heads}, {"interleaved", interleave}}) {
    const std::string dir = copy_fixture("hf_llama_tiny", as);
    testing::edit_model_tensors(dir, edit);
    const auto r = import(dir, as);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const double err = logits_error(as, "hf_llama_tiny").first;
    EXPECT_GT(err, 1e4 * kLogitTolerance) << as;  // measured 10.5 and 10.4
    std::printf("%s: max |logit - transformers| = %.3g\n", as.c_str(), err);
  }
}

TEST_F(ImportHfLlama, ExportIsBitExactAndOfTheSameClass) {
  for (const char* name : {"hf_llama_tiny", "hf_qwen2_tiny"}) {
    const std::string out = *dir_ + "/exported_" + name;
    const auto r =
        ledgerlm("export --run " + *dir_ + "/runs/" + name + " --format hf --out " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto got = read_raw(out + "/model.safetensors");
    const auto want = read_model(fixture(name));
    ASSERT_EQ(got.size(), want.size()) << name;
    for (const auto& [tensor, t] : want) {
      ASSERT_TRUE(got.count(tensor)) << tensor;
      EXPECT_EQ(got.at(tensor).shape, t.shape) << tensor;
      EXPECT_TRUE(got.at(tensor).bytes == t.bytes) << tensor << " differs";
    }
    const json a = json::parse(testing::read_file(out + "/config.json"));
    const json b = json::parse(testing::read_file(fixture(name) + "/config.json"));
    for (const char* key :
         {"architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size",
          "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
          "max_position_embeddings", "rms_norm_eps", "tie_word_embeddings", "rope_parameters"})
      EXPECT_EQ(a.at(key), b.at(key)) << name << " " << key;
    // And the export imports again to the same run.
    const auto again = import(out, std::string(name) + "_again");
    ASSERT_EQ(again.exit_code, 0) << again.output;
    EXPECT_LT(logits_error(std::string(name) + "_again", name).first, kLogitTolerance);
  }
}

// bf16 and fp16 files (how most checkpoints ship) import to their values, widened exactly.
TEST_F(ImportHfLlama, Bf16AndFp16WeightsImportToTheirValues) {
  for (const DType dtype : {DType::kBF16, DType::kF16}) {
    const std::string as = std::string("narrow_") + dtype_name(dtype);
    const std::string dir = copy_fixture("hf_qwen2_tiny", as);
    std::map<std::string, std::vector<float>> narrowed;  // the values the file now holds
    testing::edit_model_tensors(dir, [&](std::map<std::string, RawTensor>& all) {
      for (auto& [name, t] : all) {
        const size_t n = t.bytes.size() / sizeof(float);
        const float* f = reinterpret_cast<const float*>(t.bytes.data());
        std::vector<char> bytes(n * 2);
        uint16_t* h = reinterpret_cast<uint16_t*>(bytes.data());
        std::vector<float> back(n);
        for (size_t i = 0; i < n; ++i) {
          h[i] = dtype == DType::kBF16 ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
          back[i] = dtype == DType::kBF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
        }
        t = RawTensor{dtype, t.shape, std::move(bytes)};
        narrowed[name] = std::move(back);
      }
    });
    ASSERT_EQ(import(dir, as).exit_code, 0);
    const auto run = read_raw(*dir_ + "/runs/" + as + "/model.safetensors");
    const auto& wte = run.at("embed.wte");
    const float* w = reinterpret_cast<const float*>(wte.bytes.data());
    const auto& want = narrowed.at("model.embed_tokens.weight");
    EXPECT_TRUE(std::equal(want.begin(), want.end(), w)) << as;
    const auto& qkv = run.at("block.1.attn.qkv.bias");  // q (24), k (12), v (12)
    const float* q = reinterpret_cast<const float*>(qkv.bytes.data());
    const auto& v = narrowed.at("model.layers.1.self_attn.v_proj.bias");
    EXPECT_TRUE(std::equal(v.begin(), v.end(), q + 36)) << as;
  }
}

TEST_F(ImportHfLlama, RefusesWhatItCannotRepresentNamingTheKey) {
  using Edit = std::function<void(json&)>;
  const std::vector<std::tuple<std::string, Edit, std::vector<std::string>>> cases = {
      {"rope_scaling",
       [](json& c) {
         c["rope_scaling"] = {{"type", "linear"}, {"factor", 2}};
       },
       {"rope_scaling"}},
      {"rope_type",
       [](json& c) { c["rope_parameters"]["rope_type"] = "yarn"; },
       {"rope_parameters.rope_type", "\"yarn\""}},
      {"sliding", [](json& c) { c["use_sliding_window"] = true; }, {"use_sliding_window"}},
      {"moe", [](json& c) { c["num_local_experts"] = 8; }, {"num_local_experts", "experts"}},
      {"act", [](json& c) { c["hidden_act"] = "gelu"; }, {"hidden_act", "\"silu\""}},
      {"head_dim", [](json& c) { c["head_dim"] = 16; }, {"head_dim", "expected"}},
      {"unknown",
       [](json& c) { c["attn_logit_softcapping"] = 50; },
       {"unsupported key 'attn_logit_softcapping'"}},
      {"bias_mix", [](json& c) { c["attention_bias"] = true; }, {"attention_bias", "mlp_bias"}},
      {"class",
       [](json& c) { c["architectures"] = {"LlamaForSequenceClassification"}; },
       {"architectures", "LlamaForCausalLM"}},
      {"layers", [](json& c) { c.erase("num_hidden_layers"); }, {"num_hidden_layers"}},
      {"kv_heads",
       [](json& c) { c["num_key_value_heads"] = 3; },
       {"num_key_value_heads 3", "does not divide"}},
  };
  for (const auto& [as, edit, needles] : cases) {
    const std::string dir = copy_fixture("hf_llama_tiny", "bad_" + as);
    testing::edit_config_json(dir, edit);
    const auto r = import(dir, "bad_" + as);
    expect_one_error_line(r, needles);
    EXPECT_TRUE(nothing_left("bad_" + as)) << as;
  }
  // Tensors: one missing, one of another shape, a tied head that is not the embedding.
  const std::string dir = copy_fixture("hf_llama_tiny", "bad_tensor");
  testing::edit_model_tensors(dir, [](std::map<std::string, RawTensor>& t) {
    t.erase("model.layers.1.mlp.gate_proj.weight");
  });
  expect_one_error_line(import(dir, "bad_tensor"),
                        {"missing tensor 'model.layers.1.mlp.gate_proj.weight'"});
  const std::string tied = copy_fixture("hf_llama_tiny", "bad_tied");
  testing::edit_config_json(tied, [](json& c) { c["tie_word_embeddings"] = true; });
  expect_one_error_line(import(tied, "bad_tied"),
                        {"lm_head.weight differs from model.embed_tokens.weight"});
  // A shard the index names that is not there.
  const std::string shards = *dir_ + "/bad_shard";
  fs::create_directories(shards);
  for (const char* f :
       {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"})
    fs::copy_file(fixture("hf_qwen2_tiny") + "/" + f, shards + "/" + f);
  expect_one_error_line(import(shards, "bad_shard"),
                        {"shard 'model-00002-of-00002.safetensors' does not exist"});
  EXPECT_TRUE(nothing_left("bad_shard"));
}

// A model directory with a tokenizer: fixture `name` (shards merged) and the hf_families
// tokenizer.json of `family`, and the corpus prepared with it (once each).
std::string with_tokenizer(const std::string& dir_root, const std::string& name,
                           const std::string& family) {
  const std::string dst = dir_root + "/" + name + "_" + family;
  if (fs::exists(dst)) return dst;
  fs::create_directories(dst);
  fs::copy_file(fixture(name) + "/config.json", dst + "/config.json");
  write_raw(dst + "/model.safetensors", read_model(fixture(name)));
  fs::copy_file(fixture("hf_families/" + family) + "/tokenizer.json", dst + "/tokenizer.json");
  return dst;
}
std::string prepared(const std::string& dir_root, const std::string& model_dir,
                     const std::string& family) {
  const std::string data = dir_root + "/data_" + family;
  if (fs::exists(data)) return data;
  std::string text;
  const char* words[] = {"the ",     "cat ",          "1234 ",  "hello\n",
                         "  world ", "\xe6\x95\xb0 ", "tokens "};
  for (int i = 0; i < 3000; ++i) text += words[(i * 7 + i / 5) % 7];
  testing::write_file(dir_root + "/corpus.txt", text);
  const auto r = ledgerlm("prepare --input " + dir_root + "/corpus.txt --out " + data +
                          " --tokenizer hf:" + model_dir + " --val-fraction 0.1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return data;
}

// Qwen2.5 pads its embedding past its tokenizer's ids: the fixture's 640 rows for 603 ids import
// as they are, with data of that tokenizer (and only that one) for import, eval, sample and
// train --init-from; a tokenizer with more ids than the model has rows is refused by its size.
TEST_F(ImportHfLlama, PaddedEmbeddingTakesItsOwnTokenizersDataOnly) {
  const std::string model = with_tokenizer(*dir_, "hf_qwen2_tiny", "qwen2");
  const std::string data = prepared(*dir_, model, "qwen2");
  auto r = ledgerlm("import --format hf --from " + model + " --out " + *dir_ + "/runs/qd --data " +
                    data);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string run = *dir_ + "/runs/qd";
  EXPECT_NE(testing::read_file(run + "/config.toml").find("vocab_size = 640"), std::string::npos);
  r = ledgerlm("eval --run " + run);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("sample --run " + run + " --prompt the --tokens 8");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string common = " --train.out_dir " + *dir_ + "/runs --train.seq_len 16" +
                             " --train.micro_batch 2 --train.max_steps 1 --train.eval_interval 0" +
                             " --train.eval_windows 2 --train.threads 1 --init-from " + run;
  r = ledgerlm("train --train.name qd_lora --lora.rank 2 --data.dir " + data + common);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // Another tokenizer with fewer ids than the rows (SmolLM2-style, 600) is not the padded one.
  const std::string other =
      prepared(*dir_, with_tokenizer(*dir_, "hf_llama_tiny", "smollm2"), "smollm2");
  r = ledgerlm("train --train.name qd_other --data.dir " + other + common);
  expect_one_error_line(r, {"its model has vocab 640", "has vocab 600"});
  // More ids (603) than the Llama fixture's 600 rows.
  r = ledgerlm("import --format hf --from " + with_tokenizer(*dir_, "hf_llama_tiny", "smollm2") +
               " --out " + *dir_ + "/runs/ld_foreign --data " + data);
  expect_one_error_line(r, {"has vocab 603", "vocab_size 600"});
  EXPECT_TRUE(nothing_left("ld_foreign"));
}

// LoRA on the Llama module names (q, k, v, o, gate, up, down: q, k and v each their own adapter
// on its rows of the fused projection) exports a PEFT adapter whose tensors are the ones PEFT
// itself saves for those modules (fixtures/hf_llama_tiny/peft_names.json, written by PEFT for
// r = 2 on every linear layer): names and shapes. (That PeftModel.from_pretrained loads it and
// gives the merged export's logits is checked offline: tests/reference/README.md.) The fused
// qkv's one adapter is still written as q, k, v adapters sharing A; qkv with q, k or v is refused.
TEST_F(ImportHfLlama, LoraOnLlamaNamesExportsThePeftAdapterPeftWrites) {
  const std::string model = with_tokenizer(*dir_, "hf_llama_tiny", "smollm2");
  const std::string data = prepared(*dir_, model, "smollm2");
  auto r = ledgerlm("import --format hf --from " + model + " --out " + *dir_ + "/runs/ld --data " +
                    data);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string common = " --data.dir " + data + " --train.out_dir " + *dir_ + "/runs" +
                             " --train.seq_len 16 --train.micro_batch 2 --train.max_steps 1" +
                             " --train.eval_interval 0 --train.eval_windows 2 --train.threads 1" +
                             " --init-from " + *dir_ + "/runs/ld --lora.rank 2";
  r = ledgerlm("train --train.name ld_lora --lora.targets q,k,v,o,gate,up,down" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string out = *dir_ + "/ld_peft";
  r = ledgerlm("export --run " + *dir_ + "/runs/ld_lora --lora-only --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json peft = json::parse(testing::read_file(fixture("hf_llama_tiny") + "/peft_names.json"));
  auto got = read_raw(out + "/adapter_model.safetensors");
  for (const auto& [name, shape] : peft["tensors"].items()) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(json(got.at(name).shape), shape) << name;
  }
  EXPECT_EQ(got.size(), peft["tensors"].size());
  // Separate adapters: q, k and v have A of their own (trained apart, so they differ).
  const std::string attn = "base_model.model.model.layers.0.self_attn.";
  EXPECT_NE(got.at(attn + "q_proj.lora_A.weight").bytes,
            got.at(attn + "k_proj.lora_A.weight").bytes);
  const json config = json::parse(testing::read_file(out + "/adapter_config.json"));
  EXPECT_EQ(config["target_modules"],
            json({"q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj", "gate_proj"}));
  EXPECT_EQ(config["fan_in_fan_out"], false);  // nn.Linear stores (out, in)
  // The fused projection's one adapter (qkv): q, k and v adapters with one A, as before.
  r = ledgerlm("train --train.name ld_qkv --lora.targets qkv,o" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("export --run " + *dir_ + "/runs/ld_qkv --lora-only --out " + *dir_ + "/ld_qkv");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  got = read_raw(*dir_ + "/ld_qkv/adapter_model.safetensors");
  EXPECT_EQ(got.size(), 16u);  // 2 layers x q, k, v, o x (A, B)
  EXPECT_EQ(got.at(attn + "q_proj.lora_A.weight").bytes,
            got.at(attn + "k_proj.lora_A.weight").bytes);
  r = ledgerlm("train --train.name ld_both --lora.targets qkv,q" + common);
  expect_one_error_line(r, {"lora.targets", "qkv", "q, k or v"});
}

// A rotary run is exported as Llama or Qwen2, whose blocks are RMSNorm with a weight and SwiGLU:
// LayerNorm (or a GELU MLP, QK-norm, a soft-cap) is refused naming the key, writing nothing.
TEST_F(ImportHfLlama, ExportRefusesARotaryBlockNeitherClassHolds) {
  const std::string data =
      prepared(*dir_, with_tokenizer(*dir_, "hf_llama_tiny", "smollm2"), "smollm2");
  auto r = ledgerlm("train --train.name rope_ln --data.dir " + data + " --train.out_dir " + *dir_ +
                    "/runs --model.n_layer 1 --model.n_head 2 --model.n_embd 16 --model.block_size"
                    " 16 --model.position rope --model.mlp swiglu --train.seq_len 16"
                    " --train.micro_batch 2 --train.max_steps 1 --train.eval_interval 0"
                    " --train.eval_windows 2 --train.threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("export --run " + *dir_ + "/runs/rope_ln --format hf --out " + *dir_ + "/rope_ln");
  expect_one_error_line(r, {"model.norm = layernorm", "LlamaForCausalLM", "rmsnorm"});
  EXPECT_FALSE(fs::exists(*dir_ + "/rope_ln"));
}

}  // namespace
}  // namespace ledgerlm
