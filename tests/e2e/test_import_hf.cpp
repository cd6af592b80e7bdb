// `ledgerlm import --format hf` end to end, on tests/reference/fixtures/hf_gpt2_tiny (a random
// GPT2LMHeadModel transformers saved, vocab 1000 padded to 1024; gen_hf_model_fixture.py):
//   - the imported run's loss on the fixture's ids is the loss transformers computed;
//   - the independent PyTorch reference (tests/reference/gpt_ref.py) agrees on the run exported
//     again, and that export holds the fixture's tensors bit for bit;
//   - names without the "transformer." prefix, fp64 tensors, a tied lm_head.weight and mask
//     buffers import to the same weights;
//   - every refusal is one line, a non-zero exit, and leaves neither --out nor a temporary;
//   - with --data: eval and sample run, and train --init-from takes the run's architecture.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <tuple>
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

std::string fixture_dir() {
  return testing::source_dir() + "/tests/reference/fixtures/hf_gpt2_tiny";
}

class ImportHf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::make_temp_dir("import_hf_"));
    const auto r =
        ledgerlm("import --format hf --from " + fixture_dir() + " --out " + *dir_ + "/runs/tiny");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    loss_ = new json(json::parse(testing::read_file(fixture_dir() + "/loss.json")));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete loss_;
  }

  // A copy of the fixture in a fresh directory, for a test to change.
  static std::string copy_fixture(const std::string& name) {
    const std::string dst = *dir_ + "/" + name;
    fs::create_directories(dst);
    for (const char* f : {"config.json", "model.safetensors"})
      fs::copy_file(fixture_dir() + "/" + f, dst + "/" + f);
    return dst;
  }
  // The import of `model_dir` into a fresh run: its result, and whether --out is absent and no
  // temporary is left beside it when it fails.
  static testing::CommandResult import(const std::string& model_dir, const std::string& run,
                                       const std::string& extra = "") {
    return ledgerlm("import --format hf --from " + model_dir + " --out " + *dir_ + "/runs/" + run +
                    extra);
  }
  // Data of another vocab than the fixture's: the bytes tokenizer (257), prepared once.
  static std::string bytes_data() {
    const std::string data = *dir_ + "/bytes_data";
    if (!fs::exists(data)) {
      testing::write_file(*dir_ + "/bytes.txt", std::string(4000, 'a') + "\n");
      const auto r =
          ledgerlm("prepare --input " + *dir_ + "/bytes.txt --out " + data + " --tokenizer bytes");
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return data;
  }
  // The syllable corpus the data tests prepare, written once.
  static std::string corpus() {
    const std::string path = *dir_ + "/corpus.txt";
    if (fs::exists(path)) return path;
    std::string text;
    uint64_t x = 5;
    static const char* syll[] = {"ka", "lo", "mi", "ne", "ru", "sa", "te", "vi", "do", "pe",
                                 "gu", "zo", "ha", "ji", "be", "fu", "xi", "qa", "wy", "ol"};
    for (int i = 0; i < 40000; ++i) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      text += syll[(x >> 33) % 20];
      if ((x >> 40) % 3 == 0) text += (i % 12 == 11) ? "\n" : " ";
    }
    testing::write_file(path, text);
    return path;
  }
  // The corpus prepared into *dir_/NAME with `tokenizer_flags` (once).
  static std::string prepared(const std::string& name, const std::string& tokenizer_flags) {
    const std::string data = *dir_ + "/" + name;
    if (!fs::exists(data)) {
      const auto r = ledgerlm("prepare --input " + corpus() + " --out " + data + " --tokenizer " +
                              tokenizer_flags + " --val-fraction 0.1");
      EXPECT_EQ(r.exit_code, 0) << r.output;
    }
    return data;
  }
  static std::string tokenizer_fixture() {
    return testing::source_dir() + "/tests/reference/fixtures/hf_tokenizer";
  }
  // The fixture model with a tokenizer beside it: the hf_tokenizer fixture's (1000 learned
  // tokens + <|endoftext|>: 1001 ids), config.json's vocab_size 1001 and wte one zero row
  // longer. `files`: which of the tokenizer's files go with it. Made once per name.
  static std::string tokenized_model(const std::string& name,
                                     const std::vector<std::string>& files) {
    const std::string dst = *dir_ + "/" + name;
    if (fs::exists(dst)) return dst;
    copy_fixture(name);
    testing::edit_config_json(dst, [](json& c) { c["vocab_size"] = 1001; });
    testing::edit_model_tensors(dst, [](std::map<std::string, RawTensor>& t) {
      RawTensor& wte = t.at("transformer.wte.weight");
      wte.shape[0] += 1;
      wte.bytes.resize(wte.bytes.size() + static_cast<size_t>(wte.shape[1]) * sizeof(float), 0);
    });
    for (const std::string& f : files) fs::copy_file(tokenizer_fixture() + "/" + f, dst + "/" + f);
    return dst;
  }
  static bool nothing_left(const std::string& run) { return testing::nothing_left(*dir_, run); }

  static std::string* dir_;
  static json* loss_;
};
std::string* ImportHf::dir_ = nullptr;
json* ImportHf::loss_ = nullptr;

TEST_F(ImportHf, RunDirectoryHoldsConfigAndWeights) {
  const std::string run = *dir_ + "/runs/tiny";
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(run)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"config.toml", "model.safetensors"}));
  const std::string toml = testing::read_file(run + "/config.toml");
  for (const char* line : {"vocab_size = 1000", "n_layer = 2", "n_head = 4", "n_embd = 64",
                           "block_size = 64", "dropout = 0.1", "dir = \"\""})
    EXPECT_NE(toml.find(line), std::string::npos) << line << " in\n" << toml;
  SafeTensorsFile f = SafeTensorsFile::open(run + "/model.safetensors");
  EXPECT_EQ(f.get("embed.wte").shape, (std::vector<int64_t>{1024, 64}));  // padded
  for (const SafeTensorInfo& t : f.tensors()) EXPECT_EQ(t.dtype, DType::kF32) << t.name;
}

// The imported weights, run by ledgerlm's forward, give transformers' loss on the fixture's ids.
TEST_F(ImportHf, LossMatchesTransformers) {
  const auto& ids = (*loss_)["input_ids"];
  const int64_t B = static_cast<int64_t>(ids.size());
  const int64_t T = static_cast<int64_t>(ids[0].size()) - 1;  // HF shifts the labels by one
  std::vector<int32_t> tokens, targets;
  for (const auto& row : ids)
    for (int64_t t = 0; t < T; ++t) {
      tokens.push_back(row[static_cast<size_t>(t)].get<int32_t>());
      targets.push_back(row[static_cast<size_t>(t + 1)].get<int32_t>());
    }
  auto backend = backend_create_cpu(1);
  LoadedRun run = run_load_model(*dir_ + "/runs/tiny", *backend);
  GptModel model(run.config.model, run.table, *backend, DType::kF32, DType::kF32);
  model.plan(B, T);
  ForwardOptions fo;
  fo.training = false;  // transformers' loss was computed in eval mode (no dropout)
  const double ours = model.forward(run.params_tensor(), tokens.data(), targets.data(), B, T, fo);
  const double ref64 = (*loss_)["loss_float64"].get<double>();
  const double ref32 = (*loss_)["loss_float32"].get<double>();
  // Our forward is fp32 throughout; the reference is transformers on the same weights in fp64.
  // The mean of 189 per-token cross-entropies of ~7 nats carries fp32 rounding of a few ulps of
  // 7 (ulp 4.8e-7) that mostly averages out: measured 1.6e-8 here, and transformers' own fp32
  // loss is 2.7e-7 from its fp64 one. Bound 2e-6 (4 ulps) leaves room for other GEMM kernels'
  // summation orders, and is three orders below what a mapping error does: zeroing any one of
  // the fixture's bias vectors moves the loss by >= 1.6e-3, transposing a square c_proj weight
  // (shapes cannot catch it) by >= 3.1e-3.
  EXPECT_NEAR(ours, ref64, 2e-6) << "fp32 transformers: " << ref32;
  std::printf("loss: ledgerlm fp32 %.9f, transformers fp64 %.9f (diff %.3g), fp32 %.9f\n", ours,
              ref64, ours - ref64, ref32);
}

// Export gives the fixture's tensors back bit for bit (the fixture is fp32), and the independent
// PyTorch reference computes transformers' loss from that export.
TEST_F(ImportHf, ExportIsBitExactAndReferenceAgrees) {
  const std::string hf = *dir_ + "/exported";
  auto r = ledgerlm("export --run " + *dir_ + "/runs/tiny --format hf --out " + hf);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got = read_raw(hf + "/model.safetensors");
  const auto want = read_raw(fixture_dir() + "/model.safetensors");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_EQ(got.at(name).dtype, t.dtype) << name;
    EXPECT_EQ(got.at(name).shape, t.shape) << name;
    EXPECT_TRUE(got.at(name).bytes == t.bytes) << name << " differs";
  }

  const auto& ids = (*loss_)["input_ids"];
  const int64_t B = static_cast<int64_t>(ids.size()), T = static_cast<int64_t>(ids[0].size()) - 1;
  std::vector<int32_t> tokens, targets;
  for (const auto& row : ids)
    for (int64_t t = 0; t < T; ++t) {
      tokens.push_back(row[static_cast<size_t>(t)].get<int32_t>());
      targets.push_back(row[static_cast<size_t>(t + 1)].get<int32_t>());
    }
  SafeTensorsWriter w;
  w.add("tokens", DType::kI32, {B, T}, tokens.data());
  w.add("targets", DType::kI32, {B, T}, targets.data());
  w.write_atomic(*dir_ + "/batch.safetensors");
  const std::string out = *dir_ + "/ref_out.safetensors";
  r = run_command("OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE " +
                  testing::python3() + " " + testing::source_dir() +
                  "/tests/reference/gpt_ref.py --config " + hf + "/config.json --weights " + hf +
                  "/model.safetensors --batch " + *dir_ + "/batch.safetensors --out " + out +
                  " --dtype float64 --no-grads");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double ref_loss = [&] {
    double v = 0;
    SafeTensorsFile::open(out).read("loss", &v, DType::kF64, {});
    return v;
  }();
  // Two fp64 computations of the same function on the same (fp32-valued) weights: they differ
  // only by the order of fp64 sums, ~1e-15 relative; 1e-10 leaves room and nothing else.
  EXPECT_NEAR(ref_loss, (*loss_)["loss_float64"].get<double>(), 1e-10);
  std::printf("loss: reference fp64 on the export %.15f, transformers fp64 %.15f\n", ref_loss,
              (*loss_)["loss_float64"].get<double>());
}

// GPT2Model's names (no "transformer." prefix), fp64 tensors, a stored lm_head equal to wte and
// an attention mask buffer of a non-float dtype: the same weights as the fixture's import.
TEST_F(ImportHf, PrefixlessFp64TiedHeadAndMaskBuffers) {
  const std::string model = copy_fixture("variant");
  testing::edit_model_tensors(model, [](std::map<std::string, RawTensor>& t) {
    std::map<std::string, RawTensor> out;
    for (auto& [name, raw] : t) {
      ASSERT_EQ(raw.dtype, DType::kF32);
      RawTensor wide{DType::kF64, raw.shape, {}};
      const size_t n = raw.bytes.size() / 4;
      wide.bytes.resize(n * 8);
      for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, raw.bytes.data() + 4 * i, 4);
        const double d = f;  // exact
        std::memcpy(wide.bytes.data() + 8 * i, &d, 8);
      }
      out[name.substr(std::strlen("transformer."))] = wide;
    }
    out["lm_head.weight"] = out.at("wte.weight");
    out["h.0.attn.bias"] = RawTensor{DType::kU8, {1, 1, 64, 64}, std::vector<char>(64 * 64, 1)};
    t = std::move(out);
  });
  ASSERT_EQ(read_raw(model + "/model.safetensors").count("transformer.wte.weight"), 0u);
  const auto r = import(model, "variant");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto got = read_raw(*dir_ + "/runs/variant/model.safetensors");
  const auto want = read_raw(*dir_ + "/runs/tiny/model.safetensors");
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, t] : want) EXPECT_TRUE(got.at(name).bytes == t.bytes) << name;
}

// The other HF name of the same GELU, and n_inner given as 4 * n_embd, are the same model
// (model.ffn_hidden = 0, 4 x n_embd, in the run's config).
TEST_F(ImportHf, AcceptsGeluPytorchTanhAndExplicitInner) {
  const std::string model = copy_fixture("accepted");
  testing::edit_config_json(model, [](json& c) {
    c["activation_function"] = "gelu_pytorch_tanh";
    c["n_inner"] = 256;
    c["attn_pdrop"] = 0.0;  // dropout that differs: noted, resid_pdrop taken
  });
  const auto r = import(model, "accepted");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resid_pdrop = 0.1"), std::string::npos) << r.output;
  EXPECT_NE(testing::read_file(*dir_ + "/runs/accepted/config.toml").find("dropout = 0.1"),
            std::string::npos);
  EXPECT_NE(testing::read_file(*dir_ + "/runs/accepted/config.toml").find("ffn_hidden = 0"),
            std::string::npos);
}

// A GPT-2 whose MLP is not 4 x n_embd wide (n_inner = 96, n_embd 64) imports as
// model.ffn_hidden = 96, exports back bit for bit with its n_inner, trains (from --init-from,
// which takes the width), and the trained run's export imports again to the same weights.
TEST_F(ImportHf, MlpWidthOtherThan4CImportsTrainsAndRoundTrips) {
  const std::string model = tokenized_model("ffn96_model", {"tokenizer.json"});
  constexpr int64_t C = 64, F = 96;
  testing::edit_config_json(model, [](json& c) { c["n_inner"] = 96; });  // F
  testing::edit_model_tensors(model, [](std::map<std::string, RawTensor>& t) {
    uint64_t x = 17;
    auto fill = [&](RawTensor& r, std::vector<int64_t> shape) {
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> v(static_cast<size_t>(n));
      for (float& e : v) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        e = (static_cast<float>((x >> 40) % 2001) - 1000.0f) * 4e-5f;  // within +-0.04
      }
      r.shape = shape;
      r.bytes.assign(reinterpret_cast<const char*>(v.data()),
                     reinterpret_cast<const char*>(v.data() + v.size()));
    };
    for (int l = 0; l < 2; ++l) {
      const std::string h = "transformer.h." + std::to_string(l) + ".mlp.";
      fill(t.at(h + "c_fc.weight"), {C, F});  // Conv1D: (in, out)
      fill(t.at(h + "c_fc.bias"), {F});
      fill(t.at(h + "c_proj.weight"), {F, C});
    }
  });
  const std::string data = prepared("data_hf", "hf:" + model);
  auto r = import(model, "ffn96", " --data " + data);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string run = *dir_ + "/runs/ffn96";
  EXPECT_NE(testing::read_file(run + "/config.toml").find("ffn_hidden = 96"), std::string::npos);

  // Exported again: config.json says n_inner 96 and the tensors are the file's, bit for bit.
  r = ledgerlm("export --run " + run + " --format hf --out " + *dir_ + "/ffn96_export");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(json::parse(testing::read_file(*dir_ + "/ffn96_export/config.json"))["n_inner"], F);
  const auto given = read_raw(model + "/model.safetensors");
  const auto exported = read_raw(*dir_ + "/ffn96_export/model.safetensors");
  ASSERT_EQ(exported.size(), given.size());
  for (const auto& [name, t] : given) {
    ASSERT_TRUE(exported.count(name)) << name;
    EXPECT_TRUE(exported.at(name).bytes == t.bytes) << name;
  }

  // Trains a few steps from it (the width taken from the run), with a loss that goes down.
  r = ledgerlm("train --train.name ffn96_ft --data.dir " + data + " --train.out_dir " + *dir_ +
               "/runs --train.seq_len 32 --train.micro_batch 2 --train.max_steps 4"
               " --train.eval_interval 0 --train.eval_windows 2 --train.threads 1"
               " --optim.lr 1e-3 --init-from " +
               run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ft = *dir_ + "/runs/ffn96_ft";
  EXPECT_NE(testing::read_file(ft + "/config.toml").find("ffn_hidden = 96"), std::string::npos);
  const auto trained = read_raw(ft + "/model.safetensors");
  EXPECT_EQ(trained.at("block.0.mlp.fc.weight").shape, (std::vector<int64_t>{F, C}));
  EXPECT_FALSE(trained.at("block.0.mlp.fc.weight").bytes ==
               read_raw(run + "/model.safetensors").at("block.0.mlp.fc.weight").bytes)
      << "the MLP did not train";

  // The trained run exported and imported again holds the same weights.
  r = ledgerlm("export --run " + ft + " --format hf --out " + *dir_ + "/ffn96_ft_export");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = import(*dir_ + "/ffn96_ft_export", "ffn96_back");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto back = read_raw(*dir_ + "/runs/ffn96_back/model.safetensors");
  ASSERT_EQ(back.size(), trained.size());
  for (const auto& [name, t] : trained) {
    ASSERT_TRUE(back.count(name)) << name;
    EXPECT_TRUE(back.at(name).bytes == t.bytes) << name;
  }
}

struct Refusal {
  std::string name;
  std::function<void(const std::string& model_dir)> make;  // changes a copy of the fixture
  std::vector<std::string> needles;
};

TEST_F(ImportHf, RefusesWhatItCannotRepresent) {
  auto config = [](std::function<void(json&)> f) {
    return [f](const std::string& d) { testing::edit_config_json(d, f); };
  };
  auto tensors = [](std::function<void(std::map<std::string, RawTensor>&)> f) {
    return [f](const std::string& d) { testing::edit_model_tensors(d, f); };
  };
  const std::vector<Refusal> cases = {
      {"act",
       config([](json& c) { c["activation_function"] = "gelu"; }),
       {"config.json", "activation_function is \"gelu\"", "gelu_new"}},
      {"eps",
       config([](json& c) { c["layer_norm_epsilon"] = 1e-6; }),
       {"layer_norm_epsilon is 1e-06", "expected 1e-05"}},
      {"inner",
       config([](json& c) { c["n_inner"] = 0; }),
       {"n_inner is 0", "expected null or 1.."}},
      {"layer_idx",
       config([](json& c) { c["scale_attn_by_inverse_layer_idx"] = true; }),
       {"scale_attn_by_inverse_layer_idx is true", "expected false"}},
      {"unscaled",
       config([](json& c) { c["scale_attn_weights"] = false; }),
       {"scale_attn_weights is false"}},
      {"cross",
       config([](json& c) { c["add_cross_attention"] = true; }),
       {"add_cross_attention is true"}},
      // Untied (model.tie_embeddings = false): the head is a tensor of its own, which must be
      // there.
      {"untied_cfg",
       config([](json& c) { c["tie_word_embeddings"] = false; }),
       {"model.safetensors", "missing tensor 'lm_head.weight'"}},
      {"type",
       config([](json& c) { c["model_type"] = "gpt_neo"; }),
       {"model_type is \"gpt_neo\"", "expected \"gpt2\""}},
      {"no_type", config([](json& c) { c.erase("model_type"); }), {"no 'model_type'"}},
      {"vocab",
       config([](json& c) { c["vocab_size"] = 999; }),
       {"model.safetensors", "transformer.wte.weight", "[1000, 64]", "expected [999, 64]"}},
      {"untied_head",
       tensors([](std::map<std::string, RawTensor>& t) {
         RawTensor head = t.at("transformer.wte.weight");
         head.bytes[5] ^= 1;
         t["lm_head.weight"] = head;
       }),
       {"lm_head.weight differs from wte.weight", "tied"}},
      {"missing",
       tensors(
           [](std::map<std::string, RawTensor>& t) { t.erase("transformer.h.1.mlp.c_fc.bias"); }),
       {"model.safetensors", "missing tensor 'transformer.h.1.mlp.c_fc.bias'"}},
      {"extra",
       tensors([](std::map<std::string, RawTensor>& t) {
         t["transformer.h.0.attn.q_norm.weight"] = t.at("transformer.ln_f.weight");
       }),
       {"'transformer.h.0.attn.q_norm.weight' is not a parameter"}},
      {"shape",
       tensors([](std::map<std::string, RawTensor>& t) {
         RawTensor& b = t.at("transformer.h.0.attn.c_proj.weight");
         std::swap(b.shape[0], b.shape[1]);  // (64, 64): transpose keeps the shape
         RawTensor& f = t.at("transformer.h.0.mlp.c_fc.weight");
         std::swap(f.shape[0], f.shape[1]);
       }),
       {"'transformer.h.0.mlp.c_fc.weight' has shape [256, 64]", "expected [64, 256]"}},
      {"twice",
       tensors([](std::map<std::string, RawTensor>& t) {
         t["ln_f.bias"] = t.at("transformer.ln_f.bias");
       }),
       {"'transformer.ln_f.bias' is there twice"}},
      {"bin_only",
       [](const std::string& d) {
         fs::remove(d + "/model.safetensors");
         testing::write_file(d + "/pytorch_model.bin", "not read");
       },
       {"pytorch_model.bin", "safetensors is required", "safe_serialization=True"}},
      {"no_weights",
       [](const std::string& d) { fs::remove(d + "/model.safetensors"); },
       {"no model.safetensors"}},
      {"no_config",
       [](const std::string& d) { fs::remove(d + "/config.json"); },
       {"no config.json"}},
  };
  for (const Refusal& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string model = copy_fixture("bad_" + c.name);
    c.make(model);
    const auto r = import(model, c.name);
    expect_one_error_line(r, c.needles);
    EXPECT_TRUE(nothing_left(c.name));
  }
}

TEST_F(ImportHf, RefusesExistingOutUnknownFormatAndForeignData) {
  auto r = import(fixture_dir(), "tiny");
  expect_one_error_line(r, {"already exists"});
  r = ledgerlm("import --format onnx --from " + fixture_dir() + " --out " + *dir_ + "/runs/onnx");
  expect_one_error_line(r, {"expected hf"});
  EXPECT_TRUE(nothing_left("onnx"));
  // Data prepared with another tokenizer (bytes: vocab 257) on a vocab-1000 model: a smaller
  // vocab may be a padded embedding's (Qwen2.5), so what decides is the tokenizer, which this
  // model directory does not have (a larger vocab is refused by its size: ImportHfLlama).
  r = import(fixture_dir(), "foreign", " --data " + bytes_data());
  expect_one_error_line(r, {"has no tokenizer", "bytes_data", "import without --data"});
  EXPECT_TRUE(nothing_left("foreign"));
  // A run without data: eval says how to attach it.
  r = ledgerlm("eval --run " + *dir_ + "/runs/tiny");
  expect_one_error_line(r, {"no data attached", "--data"});
}

// With data prepared with the model's tokenizer attached: eval and sample run, and train
// --init-from takes the architecture from the run (and refuses a flag that contradicts it).
TEST_F(ImportHf, DataEvalSampleAndInitFrom) {
  const std::string model = tokenized_model("tok_model", {"tokenizer.json"});
  const std::string data = prepared("data_hf", "hf:" + model);
  auto r = import(model, "with_data", " --data " + data);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string run = *dir_ + "/runs/with_data";
  r = ledgerlm("eval --run " + run + " --max-windows 4 --threads 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("nats/token"), std::string::npos) << r.output;
  r = ledgerlm("sample --run " + run + " --prompt kalo --tokens 8 --threads 1 --device cpu");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // No model flags: the run's architecture. optim.lr 0 leaves the weights as they started, so
  // the new run's weights show the start was the import, bit for bit.
  const std::string common = " --data.dir " + data + " --train.out_dir " + *dir_ +
                             "/runs --train.seq_len 32 --train.micro_batch 2 --train.max_steps 1"
                             " --train.eval_interval 0 --train.eval_windows 2 --train.threads 1"
                             " --optim.lr 0 --init-from " +
                             run;
  r = ledgerlm("train --train.name ft" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("--init-from " + run + ": model.vocab_size = 1001, model.n_layer = 2"),
            std::string::npos)
      << r.output;
  const std::string toml = testing::read_file(*dir_ + "/runs/ft/config.toml");
  for (const char* line : {"n_layer = 2", "n_head = 4", "n_embd = 64", "block_size = 64"})
    EXPECT_NE(toml.find(line), std::string::npos) << line;
  const auto started = read_raw(run + "/model.safetensors");
  const auto trained = read_raw(*dir_ + "/runs/ft/model.safetensors");
  for (const auto& [name, t] : started) EXPECT_TRUE(trained.at(name).bytes == t.bytes) << name;

  // A model key given with the run's value is fine; another value is refused before anything
  // is created.
  r = ledgerlm("train --train.name same --model.n_embd 64" + common);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("train --train.name deeper --model.n_layer 3" + common);
  expect_one_error_line(r, {"--init-from", "model.n_layer = 2", "model.n_layer = 3"});
  EXPECT_FALSE(fs::exists(*dir_ + "/runs/deeper"));
  // Data of another vocab than the run's is refused in the run's terms.
  r = ledgerlm("train --train.name other_vocab" + common + " --data.dir " + bytes_data());
  expect_one_error_line(r, {"--init-from", "its model has vocab 1001", "has vocab 257"});
  EXPECT_FALSE(fs::exists(*dir_ + "/runs/other_vocab"));
}

// --data must hold the model's own tokenizer: the vocab size alone would take data of any
// tokenizer that size, and eval would print a meaningless loss.
TEST_F(ImportHf, DataMustBePreparedWithTheModelsTokenizer) {
  const std::string model = tokenized_model("tok_model", {"tokenizer.json"});
  const std::string data = prepared("data_hf", "hf:" + model);
  auto r = import(model, "tok_same", " --data " + data);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The same tokenizer as vocab.json + merges.txt beside the model is the same tokenizer.
  r = import(tokenized_model("tok_model_vm", {"vocab.json", "merges.txt"}), "tok_vm",
             " --data " + data);
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // Another Hugging Face tokenizer of the same size: two ids swapped.
  json tok = json::parse(testing::read_file(tokenizer_fixture() + "/tokenizer.json"));
  json& vocab = tok["model"]["vocab"];
  ASSERT_EQ(vocab["\u0120the"], 258);
  std::swap(vocab["\u0120the"], vocab["\u0120and"]);
  fs::create_directories(*dir_ + "/tok_swapped");
  ASSERT_TRUE(testing::write_file(*dir_ + "/tok_swapped/tokenizer.json", tok.dump()));
  const std::string swapped = prepared("data_swapped", "hf:" + *dir_ + "/tok_swapped");
  ASSERT_EQ(json::parse(testing::read_file(swapped + "/meta.json"))["vocab_size"], 1001);
  r = import(model, "tok_swapped", " --data " + swapped);
  expect_one_error_line(r, {"was not prepared with the model's tokenizer", "id 258 is",
                            "prepare --tokenizer hf:" + model});
  EXPECT_TRUE(nothing_left("tok_swapped"));

  // ledgerlm's own BPE of the same size.
  const std::string bpe = prepared("data_bpe1001", "bpe --vocab-size 1001");
  ASSERT_EQ(json::parse(testing::read_file(bpe + "/meta.json"))["vocab_size"], 1001);
  r = import(model, "tok_bpe", " --data " + bpe);
  expect_one_error_line(r, {"was not prepared with the model's tokenizer", "ledgerlm's BPE"});
  EXPECT_TRUE(nothing_left("tok_bpe"));

  // A model directory without tokenizer files cannot show its tokenizer: --data is refused.
  const std::string bpe1000 = prepared("data_bpe1000", "bpe --vocab-size 1000");
  ASSERT_EQ(json::parse(testing::read_file(bpe1000 + "/meta.json"))["vocab_size"], 1000);
  r = import(fixture_dir(), "tok_none", " --data " + bpe1000);
  expect_one_error_line(
      r,
      {"has no tokenizer", "expected tokenizer.json, vocab.json + merges.txt, or tokenizer.model"});
  EXPECT_TRUE(nothing_left("tok_none"));
}

// NaN or infinity in the weights is refused at import, naming the tensor and the first bad
// element, and nothing is written (not left for eval or sample to find).
TEST_F(ImportHf, RefusesNonFiniteWeightsNamingTheTensor) {
  const std::vector<std::tuple<std::string, int64_t, float, std::string>> cases = {
      {"transformer.h.1.mlp.c_fc.weight", 5, std::numeric_limits<float>::quiet_NaN(),
       "holds nan at element 5"},
      {"transformer.ln_f.bias", 63, -std::numeric_limits<float>::infinity(),
       "holds -inf at element 63"},
  };
  int n = 0;
  for (const auto& [tensor, at, value, message] : cases) {
    const std::string name = "nonfinite" + std::to_string(n++);
    const std::string model = copy_fixture(name);
    testing::edit_model_tensors(
        model, [&, &tensor = tensor, at = at, value = value](std::map<std::string, RawTensor>& t) {
          std::memcpy(t.at(tensor).bytes.data() + at * sizeof(float), &value, sizeof(float));
        });
    const auto r = import(model, name);
    expect_one_error_line(r, {model + "/model.safetensors", "tensor '" + tensor + "'", message});
    EXPECT_TRUE(nothing_left(name));
  }
}

// export --lora-only names the base the adapters go on in adapter_config.json: the Hugging Face
// directory of an imported base, which transformers loads as it is; for a base ledgerlm trained,
// that run's directory.
TEST_F(ImportHf, PeftAdapterNamesItsBaseModel) {
  const std::string model = tokenized_model("tok_model", {"tokenizer.json"});
  const std::string data = prepared("data_hf", "hf:" + model);
  ASSERT_EQ(import(model, "peft_base", " --data " + data).exit_code, 0);
  const std::string runs = *dir_ + "/runs";
  const std::string common = " --data.dir " + data + " --train.out_dir " + runs +
                             " --train.seq_len 32 --train.micro_batch 2 --train.max_steps 1"
                             " --train.eval_interval 0 --train.eval_windows 2 --train.threads 1";
  auto base_of = [&](const std::string& lora_run) {
    const auto e = ledgerlm("export --run " + runs + "/" + lora_run + " --lora-only --out " +
                            *dir_ + "/" + lora_run + "_peft");
    EXPECT_EQ(e.exit_code, 0) << e.output;
    return json::parse(testing::read_file(*dir_ + "/" + lora_run + "_peft/adapter_config.json"))
        .at("base_model_name_or_path");
  };
  auto r = ledgerlm("train --train.name peft_lora --lora.rank 2 --init-from " + runs +
                    "/peft_base" + common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(base_of("peft_lora"), fs::absolute(model).lexically_normal().string());

  // A base ledgerlm trained (here: from the import, a step at lr 0) has no Hugging Face
  // directory: the adapter names the run it was trained on.
  r = ledgerlm("train --train.name peft_full --optim.lr 0 --init-from " + runs + "/peft_base" +
               common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("train --train.name peft_lora2 --lora.rank 2 --init-from " + runs + "/peft_full" +
               common);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(base_of("peft_lora2"), fs::absolute(runs + "/peft_full").lexically_normal().string());
}

}  // namespace
}  // namespace ledgerlm
