// Cross-check of the whole GPT-2 model against the independent PyTorch reference
// (tests/reference/gpt_ref.py): loss, logits and EVERY parameter gradient, in fp32 and fp64.
//
// The weights travel through the HF export (ckpt/hf_export.h), so this also checks the export
// mapping end to end: a transposed or misnamed tensor shows up as a loss mismatch. Reference
// gradients come back in HF layout and are mapped to ours with params_from_hf_tensors; the wte
// gradient includes the tied LM head's contribution, and padded vocab rows must stay exactly 0.
//
// If the interpreter lacks torch the test FAILS (it does not skip): CI installs python3-torch.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/hf_export.h"
#include "ckpt/safetensors.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "tests/support/config_test_support.h"
#include "tests/support/reference_config_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

constexpr int64_t kBatch = 3, kSeq = 16;

struct Precision {
  DType dtype;             // params, grads and activations
  const char* torch_name;  // --dtype of gpt_ref.py
  // Gradients: max|a-b| <= atol + rtol * max|ref| per tensor.
  double grad_atol, grad_rtol;
  double loss_rtol;
  double logit_atol, logit_rtol;
};

// fp32: two independent fp32 implementations sum in different orders. Measured here: gradients
// agree to ~7e-7 x max|ref| per tensor, logits to ~3e-7 relative, the loss to ~6e-8; rtol 1e-4
// leaves >100x margin while a wrong formula is off by O(1). Subtle errors (a constant off by
// 1e-3) are below fp32 resolution: the fp64 case catches those.
constexpr Precision kFp32{DType::kF32, "float32", 1e-5, 1e-4, 1e-5, 1e-5, 1e-5};
// fp64: both sides compute in double (agreeing to ~1e-14); the comparison happens after
// rounding both to fp32 (relative 6e-8 per element), hence rtol 1e-6. It fails when, e.g., the
// GELU constant 0.044715 is changed to 0.0447 in one implementation.
constexpr Precision kFp64{DType::kF64, "float64", 1e-12, 1e-6, 1e-12, 1e-12, 1e-6};

ModelConfig tiny_config() {
  // vocab 65 padded to 128: the padding must get no mass and zero gradient
  ModelConfig cfg = testing::model_config_of({.vocab = 65, .L = 2, .H = 2, .C = 32, .block = 16});
  return cfg;
}

double get(Tensor t, int64_t i) {
  return t.dtype == DType::kF64 ? t.as<double>()[i] : t.as<float>()[i];
}
void set(Tensor t, int64_t i, double v) {
  if (t.dtype == DType::kF64)
    t.as<double>()[i] = v;
  else
    t.as<float>()[i] = static_cast<float>(v);
}

// Makes every gradient non-trivial: the GPT-2 init has LN weights 1 and biases 0 (whose
// gradients would not see a mixed-up scale or shift), and std 0.02 makes attention nearly
// uniform. Values are rounded to fp32 so the fp32 HF export carries them exactly in fp64 runs.
void perturb_params(const ParamTable& table, Tensor params) {
  std::mt19937_64 rng(20240607);
  std::normal_distribution<double> noise(0.0, 0.1);
  for (const ParamInfo& p : table.params) {
    for (int64_t i = 0; i < p.numel; ++i) {
      const int64_t k = p.offset + i;
      double v = get(params, k);
      if (p.kind == ParamKind::kBias || p.kind == ParamKind::kNormWeight)
        v += noise(rng);
      else
        v *= 5.0;
      set(params, k, static_cast<float>(v));
    }
  }
}

// Our buffer (fp32 or fp64) as fp32, for comparison with fp32-rounded reference values.
std::vector<float> to_f32(Tensor t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<float>(get(t, i));
  return out;
}

// With `other_convention`, the reference runs with --rope-interleaved (pairs (2i, 2i+1) rather
// than Llama's (i, i + hd/2)) and must NOT match: its logits differ by far more than rounding.
void check_against_reference(const Precision& prec, const ModelConfig& cfg = tiny_config(),
                             bool other_convention = false) {
  const ParamTable table = param_table_build(cfg);
  auto backend = backend_create_cpu(2);
  const size_t es = dtype_size(prec.dtype);
  Buffer param_buf = backend->allocate(MemTag::kParams, static_cast<size_t>(table.total) * es);
  Buffer grad_buf = backend->allocate(MemTag::kGrads, static_cast<size_t>(table.total) * es);
  const Tensor params(param_buf.data(), prec.dtype), grads(grad_buf.data(), prec.dtype);
  gpt_init_params(table, params, 1234, *backend);
  perturb_params(table, params);

  std::mt19937 rng(99);
  std::uniform_int_distribution<int32_t> token(0, static_cast<int32_t>(cfg.vocab_size) - 1);
  std::vector<int32_t> tokens(kBatch * kSeq), targets(kBatch * kSeq);
  for (auto& t : tokens) t = token(rng);
  for (auto& t : targets) t = token(rng);

  GptModel model(cfg, table, *backend, prec.dtype, prec.dtype, prec.dtype);
  model.plan(kBatch, kSeq);
  const double loss = model.forward(params, tokens.data(), targets.data(), kBatch, kSeq);
  model.backward(params, grads, 1.0);
  const std::vector<float> ours = to_f32(grads, table.total);
  // Logits of a forward without targets (same weights and tokens).
  model.forward(params, tokens.data(), nullptr, kBatch, kSeq, ForwardOptions{false, 0, 0});
  const int64_t vp = cfg.padded_vocab(), v = cfg.vocab_size;
  std::vector<float> logits(static_cast<size_t>(kBatch * kSeq * v));
  for (int64_t r = 0; r < kBatch * kSeq; ++r)
    for (int64_t c = 0; c < v; ++c)
      logits[static_cast<size_t>(r * v + c)] = static_cast<float>(get(model.logits(), r * vp + c));

  // Export, run the reference.
  const std::string dir = testing::make_temp_dir("llm_ref_");
  ASSERT_FALSE(dir.empty());
  hf_write_safetensors(dir + "/model.safetensors", hf_tensors_from_params(table, params));
  testing::write_reference_config(dir + "/config.json", cfg);
  SafeTensorsWriter batch;
  batch.add("tokens", DType::kI32, {kBatch, kSeq}, tokens.data());
  batch.add("targets", DType::kI32, {kBatch, kSeq}, targets.data());
  batch.write_atomic(dir + "/batch.safetensors");
  const std::string cmd =
      "OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE " + testing::python3() +
      " " + testing::source_dir() + "/tests/reference/gpt_ref.py --config " + dir +
      "/config.json --weights " + dir + "/model.safetensors --batch " + dir +
      "/batch.safetensors --out " + dir + "/ref.safetensors --logits --dtype " + prec.torch_name +
      (other_convention ? " --rope-interleaved --no-grads" : "");
  const auto res = testing::run_command(cmd);
  ASSERT_EQ(res.exit_code, 0) << "the PyTorch reference failed (python3-torch installed?)\n"
                              << cmd << "\n"
                              << res.output;

  std::vector<HfTensor> ref = hf_read_safetensors(dir + "/ref.safetensors");
  SafeTensorsFile ref_file = SafeTensorsFile::open(dir + "/ref.safetensors");
  double ref_loss = 0.0;
  ref_file.read("loss", &ref_loss, DType::kF64, {});
  std::vector<float> ref_logits = ref_file.read_f32("logits");
  std::erase_if(ref, [](const HfTensor& t) { return t.name == "loss" || t.name == "logits"; });

  if (other_convention) {
    ASSERT_EQ(ref_logits.size(), logits.size());
    double worst = 0.0;
    for (size_t i = 0; i < logits.size(); ++i)
      worst = std::max(worst, static_cast<double>(std::fabs(logits[i] - ref_logits[i])));
    // Logits here are O(1..10); matching conventions agree to ~1e-5.
    EXPECT_GT(worst, 0.1) << "the interleaved rotary convention gives the same logits: the test "
                             "cannot tell the conventions apart";
    return;
  }
  // Loss: a mean of 48 token losses of size ~4.
  EXPECT_NEAR(loss, ref_loss, prec.loss_rtol * std::fabs(ref_loss))
      << "ours " << loss << " reference " << ref_loss;
  ASSERT_EQ(ref_logits.size(), logits.size());
  auto lc = testing::compare_tensor("logits", logits.data(), ref_logits.data(),
                                    static_cast<int64_t>(logits.size()), prec.logit_atol,
                                    prec.logit_rtol);
  EXPECT_TRUE(lc.ok) << lc.message;

  // Every gradient, per tensor, in our layout (padded vocab rows of the reference are 0).
  std::vector<float> ref_grads(static_cast<size_t>(table.total), 0.0f);
  params_from_hf_tensors(table, ref, Tensor(ref_grads.data(), DType::kF32));
  std::vector<char> covered(static_cast<size_t>(table.total), 0);
  for (const ParamInfo& p : table.params) {
    auto c = testing::compare_tensor(p.name + " (" + p.hf_name + ")", ours.data() + p.offset,
                                     ref_grads.data() + p.offset, p.numel, prec.grad_atol,
                                     prec.grad_rtol);
    EXPECT_TRUE(c.ok) << c.message;
    double max_ref = 0.0;
    for (int64_t i = 0; i < p.numel; ++i)
      max_ref = std::fmax(max_ref, std::fabs(ref_grads[static_cast<size_t>(p.offset + i)]));
    EXPECT_GT(max_ref, 0.0) << p.name << ": reference gradient is all zero, test is too weak";
    for (int64_t i = 0; i < p.numel; ++i) covered[static_cast<size_t>(p.offset + i)] = 1;
    const int64_t real = p.hf_rows * (p.numel / p.shape[0]);
    for (int64_t i = real; i < p.numel; ++i) {
      ASSERT_EQ(ours[static_cast<size_t>(p.offset + i)], 0.0f)
          << p.name << ": padded vocab row element " << i << " has a gradient";
    }
  }
  // Alignment padding between tensors and at unit ends must never be written.
  for (int64_t i = 0; i < table.total; ++i) {
    if (!covered[static_cast<size_t>(i)]) {
      ASSERT_EQ(ours[static_cast<size_t>(i)], 0.0f) << "gradient written into padding at " << i;
    }
  }
}

TEST(ReferenceGpt, MatchesPytorchFp32) {
  check_against_reference(kFp32);
}
TEST(ReferenceGpt, MatchesPytorchFp64) {
  check_against_reference(kFp64);
}
// model.ffn_hidden: an MLP of width 48 rather than 4 x 32, exported as n_inner = 48, which the
// reference reads.
TEST(ReferenceGpt, MatchesPytorchFp64WithMlpWidthOtherThan4C) {
  ModelConfig cfg = tiny_config();
  cfg.ffn_hidden = 48;
  check_against_reference(kFp64, cfg);
}

// MLP variants, the untied head and the logit soft-cap (model.mlp, model.tie_embeddings,
// model.logit_softcap), against gpt_ref.py's own formulas. The perturbed weights (matrices at std
// 0.1) give logits of std ~0.6, so a cap of 1 bends them by ~10%: a missing or misplaced cap, a
// swapped gate and up, or the wte head in place of lm_head moves every tensor by O(1).
ModelConfig variant_config(const char* mlp, bool tie, double cap) {
  ModelConfig cfg = tiny_config();
  cfg.mlp = mlp;
  cfg.ffn_hidden = 48;  // SwiGLU's default (Llama's rule) would be 256 for C = 32
  cfg.tie_embeddings = tie;
  cfg.logit_softcap = cap;
  return cfg;
}
TEST(ReferenceGpt, MatchesPytorchFp64WithSwiglu) {
  check_against_reference(kFp64, variant_config("swiglu", true, 0.0));
}
TEST(ReferenceGpt, MatchesPytorchFp64WithRelu2UntiedHeadAndLogitSoftcap) {
  check_against_reference(kFp64, variant_config("relu2", false, 1.0));
}
TEST(ReferenceGpt, MatchesPytorchFp32WithSwigluUntiedHeadAndLogitSoftcap) {
  check_against_reference(kFp32, variant_config("swiglu", false, 1.0));
}

// Attention variants (model.position = rope, n_kv_head, qk_norm), logits compared per position
// and every gradient, on the sharpened weights above (attention far from uniform, so a wrong
// rotation, grouping or norm moves the result). rope_theta 100 makes the slow pairs turn too.
ModelConfig rope_config() {
  ModelConfig cfg = tiny_config();
  cfg.position = "rope";
  cfg.rope_theta = 100.0;
  return cfg;
}
TEST(ReferenceGpt, MatchesPytorchFp32WithRotaryPositions) {
  check_against_reference(kFp32, rope_config());
}
// The other rotary convention (interleaved pairs) gives different logits: the match above pins
// Hugging Face Llama's half-split pairs.
TEST(ReferenceGpt, RotaryInterleavedPairsGiveADifferentResult) {
  check_against_reference(kFp32, rope_config(), true);
}
// QK-norm before the rotation, with grouped-query attention (4 query heads on 2 kv heads:
// c_attn 32 + 2 x 2 x 8 = 64 wide), in fp32 and fp64.
TEST(ReferenceGpt, MatchesPytorchWithQkNormRopeAndGroupedQuery) {
  ModelConfig cfg = rope_config();
  cfg.n_head = 4;
  cfg.n_kv_head = 2;
  cfg.qk_norm = true;
  check_against_reference(kFp32, cfg);
  check_against_reference(kFp64, cfg);
}

// model.norm. Llama's norm: RMSNorm with a weight, eps 1e-6, no biases but Qwen2's
// q, k, v bias; in fp32 (to fp32 rounding) and fp64.
ModelConfig rms_config() {
  ModelConfig cfg = tiny_config();
  cfg.norm = "rmsnorm";
  cfg.norm_eps = 1e-6;
  cfg.bias = false;
  cfg.qkv_bias = true;
  return cfg;
}
TEST(ReferenceGpt, MatchesPytorchFp32RmsNormNoBiasQkvBias) {
  check_against_reference(kFp32, rms_config());
}
TEST(ReferenceGpt, MatchesPytorchFp64RmsNormNoBiasQkvBias) {
  check_against_reference(kFp64, rms_config());
}
// nanochat's: a weightless RMSNorm and no biases at all, eps 0.05: large enough that eps outside
// the square root (or added to the root mean square) moves the logits far beyond the tolerance.
TEST(ReferenceGpt, MatchesPytorchFp64WeightlessRmsNormNoBias) {
  ModelConfig cfg = rms_config();
  cfg.norm_weight = false;
  cfg.qkv_bias = false;
  cfg.norm_eps = 0.05;
  check_against_reference(kFp64, cfg);
}
// LayerNorm without its bias (model.bias = false) and with eps 0.01.
TEST(ReferenceGpt, MatchesPytorchFp64LayerNormWithoutBias) {
  ModelConfig cfg = tiny_config();
  cfg.bias = false;
  cfg.norm_eps = 0.01;
  check_against_reference(kFp64, cfg);
}

}  // namespace
}  // namespace ledgerlm
