// Equivalences of the fp32 GPT model that the trainer relies on:
//   - gradient accumulation: B=8 x A=1, B=2 x A=4 and B=1 x A=8 over the same 8 sequences
//     (backward with loss_scale 1/A into one fp32 gradient buffer) give the same gradient;
//   - dropout masks follow each sequence's place in the global batch: any micro-batch split of
//     the same 8 sequences with dropout on gives the same loss and gradient as the whole batch;
//   - determinism: same inputs and thread count => bit-identical loss and gradients;
//   - recompute none / mlp / block: bit-identical losses and gradients, with and without dropout
//     (recompute replays exactly the same ops in the same order, so bitwise is the contract);
//   - the KV-cache decoder's logits equal the full forward's logits at every position;
//   - all of the above for the MLP variants (model.mlp = swiglu, relu2), the untied head and the
//     logit soft-cap.
//   - all of the above for the attention variants (rotary positions, grouped-query attention,
//     QK-norm: attention_variants()).
//   - all of these for the norm variants too (model.norm, norm_weight, bias, qkv_bias).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "model/gpt.h"
#include "model/gpt_decode.h"
#include "model/param_table.h"
#include "tests/support/config_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

ModelConfig small_config(double dropout = 0.0, const std::string& recompute = "none") {
  // vocab 50 padded to 64
  ModelConfig c = testing::model_config_of({.vocab = 50, .L = 2, .H = 2, .C = 32, .block = 16});
  c.dropout = dropout;
  c.recompute = recompute;
  return c;
}

// The block variants: SwiGLU with an untied, soft-capped head (the Llama / nanochat end of the
// options) and ReLU^2 with the tied head.
ModelConfig variant_config(const std::string& mlp, double dropout = 0.0,
                           const std::string& recompute = "none") {
  ModelConfig c = small_config(dropout, recompute);
  c.mlp = mlp;
  c.ffn_hidden = 48;
  c.tie_embeddings = mlp != "swiglu";
  c.logit_softcap = mlp == "swiglu" ? 2.0 : 0.0;
  return c;
}

// The attention variants together: rotary positions (rope_theta 100 so that every pair turns
// within 16 positions), 4 query heads on 2 kv heads (hd 8), QK-norm.
ModelConfig attention_variants(ModelConfig c) {
  c.position = "rope";
  c.rope_theta = 100.0;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.qk_norm = true;
  return c;
}

// model.norm: `c` with the norm variant `v`: 1 Llama/Qwen2 (RMSNorm with a weight, eps
// 1e-6, no biases but q, k, v's), 2 nanochat (weightless RMSNorm, no biases), 3 LayerNorm without
// biases, eps 1e-3; 0 leaves GPT-2's.
ModelConfig norm_variant(ModelConfig c, int v) {
  if (v == 1 || v == 2) {
    c.norm = "rmsnorm";
    c.norm_eps = 1e-6;
    c.bias = false;
    c.qkv_bias = v == 1;
    c.norm_weight = v == 1;
  } else if (v == 3) {
    c.bias = false;
    c.norm_eps = 1e-3;
  }
  return c;
}
constexpr int kNormVariants[] = {1, 2, 3};

// Random parameters of a larger scale than the GPT-2 init (std 0.02) so that every tensor's
// gradient and the logits are O(0.1 .. 1): differences then show above the fp32 noise floor.
std::vector<float> random_params(const ParamTable& table, uint64_t seed) {
  std::vector<float> p(static_cast<size_t>(table.total), 0.0f);
  for (size_t pi = 0; pi < table.params.size(); ++pi) {
    const ParamInfo& info = table.params[pi];
    for (int64_t i = 0; i < info.numel; ++i) {
      auto bits = rng_bits(seed, RngStream::kInit, 2000 + pi, static_cast<uint64_t>(i));
      double z = rng_normal(bits[0], bits[1]);
      p[static_cast<size_t>(info.offset + i)] =
          static_cast<float>(info.kind == ParamKind::kNormWeight ? 1.0 + 0.1 * z : 0.2 * z);
    }
  }
  return p;
}

// Deterministic token streams: `count` sequences of T inputs and their shifted targets.
void make_batch(int64_t count, int64_t T, int64_t vocab, std::vector<int32_t>* tokens,
                std::vector<int32_t>* targets) {
  std::vector<int32_t> stream(static_cast<size_t>(count * (T + 1)));
  for (size_t i = 0; i < stream.size(); ++i)
    stream[i] = static_cast<int32_t>(rng_bits(7, RngStream::kData, i, 0)[0] % vocab);
  tokens->resize(static_cast<size_t>(count * T));
  targets->resize(tokens->size());
  for (int64_t s = 0; s < count; ++s) {
    for (int64_t t = 0; t < T; ++t) {
      (*tokens)[s * T + t] = stream[s * (T + 1) + t];
      (*targets)[s * T + t] = stream[s * (T + 1) + t + 1];
    }
  }
}

struct StepResult {
  double loss = 0.0;  // mean over micro-batches of the per-micro mean CE
  std::vector<float> grads;
};

// One training step's forward/backward over `total` sequences in micro-batches of `micro`.
StepResult run_step(const ModelConfig& cfg, const ParamTable& table, std::vector<float>& params,
                    const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets,
                    int64_t total, int64_t micro, int64_t T, int threads, uint64_t step = 0) {
  auto be = backend_create_cpu(threads);
  GptModel model(cfg, table, *be, DType::kF32, DType::kF32);
  StepResult r;
  r.grads.assign(static_cast<size_t>(table.total), 0.0f);
  Tensor pt(params.data(), DType::kF32), gt(r.grads.data(), DType::kF32);
  const int64_t A = total / micro;
  for (int64_t m = 0; m < A; ++m) {
    ForwardOptions fo;
    fo.training = true;
    fo.seed = 11;
    fo.step = step;
    fo.first_sequence = static_cast<uint64_t>(m * micro);
    r.loss += model.forward(pt, tokens.data() + m * micro * T, targets.data() + m * micro * T,
                            micro, T, fo);
    model.backward(pt, gt, 1.0 / static_cast<double>(A));
  }
  r.loss /= static_cast<double>(A);
  return r;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// First parameter whose gradient differs bitwise, for the failure message.
std::string first_difference(const ParamTable& table, const std::vector<float>& a,
                             const std::vector<float>& b) {
  for (const ParamInfo& p : table.params) {
    if (std::memcmp(a.data() + p.offset, b.data() + p.offset, p.numel * sizeof(float)) != 0) {
      auto r =
          testing::compare_tensor(p.name, a.data() + p.offset, b.data() + p.offset, p.numel, 0, 0);
      return r.message;
    }
  }
  return "(no parameter differs; padding does)";
}

// Gradient accumulation. Tolerance max|a-b| <= 1e-5 + 1e-4 x max|ref| per tensor: the same
// sums in a different order (GEMM over 8 rows vs 4 partial sums of 2, per-micro 1/A scaling
// before the sum instead of 1/(B*T) over all) differ by a few fp32 ulps of the partial sums;
// measured: up to 3.4e-7 x max|ref|. Not bitwise: the order of additions differs.
void check_accumulation(const ModelConfig& cfg) {
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params = random_params(table, 5);
  const int64_t T = 16, total = 8;
  std::vector<int32_t> tokens, targets;
  make_batch(total, T, cfg.vocab_size, &tokens, &targets);
  StepResult ref = run_step(cfg, table, params, tokens, targets, total, 8, T, 2);
  for (int64_t micro : {2, 1}) {
    StepResult got = run_step(cfg, table, params, tokens, targets, total, micro, T, 2);
    // Equal micro-batch sizes: the mean of per-micro means is the global mean.
    EXPECT_NEAR(got.loss, ref.loss, 1e-6 * std::fabs(ref.loss)) << "B=" << micro;
    for (const ParamInfo& p : table.params) {
      auto r = testing::compare_tensor(p.name, got.grads.data() + p.offset,
                                       ref.grads.data() + p.offset, p.numel, 1e-5, 1e-4);
      EXPECT_TRUE(r.ok) << "B=" << micro << " A=" << total / micro << ": " << r.message;
    }
  }
  // The comparison must not be vacuous: the accumulated gradient is far from zero.
  double ss = 0.0;
  for (float g : ref.grads) ss += static_cast<double>(g) * g;
  EXPECT_GT(std::sqrt(ss), 1e-2);
}

TEST(ModelEquivalence, GradientAccumulationMatchesOneBigBatch) {
  check_accumulation(small_config());
}
TEST(ModelEquivalence, GradientAccumulationMatchesOneBigBatchWithAttentionVariants) {
  check_accumulation(attention_variants(small_config()));
}
TEST(ModelEquivalence, GradientAccumulationMatchesOneBigBatchNormVariants) {
  for (int v : kNormVariants) {
    SCOPED_TRACE("norm variant " + std::to_string(v));
    check_accumulation(norm_variant(small_config(), v));
  }
}

// Dropout on, the same global batch split 8x1, 4x2, 2x4, 1x8: the masks are keyed by each
// sequence's index in the global batch, so every split drops the same elements and only the
// summation order differs — the tolerance of the accumulation test above applies. Before masks
// followed the sequence they were keyed by micro-batch, and the splits differed by ~1e-3 in the
// loss (an O(1) change of which elements are dropped).
TEST(ModelEquivalence, DropoutMasksIndependentOfTheMicroBatchSplit) {
  const ModelConfig cfg = small_config(0.1);
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params = random_params(table, 5);
  const int64_t T = 16, total = 8;
  std::vector<int32_t> tokens, targets;
  make_batch(total, T, cfg.vocab_size, &tokens, &targets);
  StepResult ref = run_step(cfg, table, params, tokens, targets, total, 8, T, 2, 7);
  for (int64_t micro : {4, 2, 1}) {
    StepResult got = run_step(cfg, table, params, tokens, targets, total, micro, T, 2, 7);
    EXPECT_NEAR(got.loss, ref.loss, 1e-6 * std::fabs(ref.loss)) << "B=" << micro;
    for (const ParamInfo& p : table.params) {
      auto r = testing::compare_tensor(p.name, got.grads.data() + p.offset,
                                       ref.grads.data() + p.offset, p.numel, 1e-5, 1e-4);
      EXPECT_TRUE(r.ok) << "B=" << micro << " A=" << total / micro << ": " << r.message;
    }
  }
  // The masks are active: without dropout the loss differs by far more than the tolerance.
  StepResult plain = run_step(small_config(0.0), table, params, tokens, targets, total, 8, T, 2, 7);
  EXPECT_GT(std::fabs(plain.loss - ref.loss), 1e-3 * std::fabs(ref.loss));
}

// Two runs of the same step (same inputs, same thread count) give the same loss and gradients bit
// for bit.
void expect_repeated_step_bit_identical(const ModelConfig& cfg) {
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params = random_params(table, 6);
  const int64_t T = 16, total = 4;
  std::vector<int32_t> tokens, targets;
  make_batch(total, T, cfg.vocab_size, &tokens, &targets);
  StepResult a = run_step(cfg, table, params, tokens, targets, total, 2, T, 2);
  StepResult b = run_step(cfg, table, params, tokens, targets, total, 2, T, 2);
  EXPECT_EQ(std::memcmp(&a.loss, &b.loss, sizeof(double)), 0) << a.loss << " vs " << b.loss;
  EXPECT_TRUE(bit_equal(a.grads, b.grads)) << first_difference(table, a.grads, b.grads);
}

TEST(ModelEquivalence, SameInputsSameThreadsBitIdentical) {
  for (double dropout : {0.0, 0.1}) {
    SCOPED_TRACE("dropout " + std::to_string(dropout));
    expect_repeated_step_bit_identical(small_config(dropout));
  }
}

// `variant` maps the GPT-2 config to the one checked.
void check_recompute_modes(ModelConfig (*variant)(ModelConfig)) {
  auto small = [&](double dropout, const char* mode) {
    return variant(small_config(dropout, mode));
  };
  for (double dropout : {0.0, 0.15}) {
    const ParamTable table = param_table_build(small(dropout, "none"));
    std::vector<float> params = random_params(table, 8);
    const int64_t T = 12, total = 4;
    std::vector<int32_t> tokens, targets;
    make_batch(total, T, 50, &tokens, &targets);
    StepResult ref =
        run_step(small(dropout, "none"), table, params, tokens, targets, total, 2, T, 2, 100);
    for (const char* mode : {"mlp", "block"}) {
      StepResult got =
          run_step(small(dropout, mode), table, params, tokens, targets, total, 2, T, 2, 100);
      EXPECT_EQ(std::memcmp(&got.loss, &ref.loss, sizeof(double)), 0)
          << mode << " dropout " << dropout << ": loss " << got.loss << " vs " << ref.loss;
      EXPECT_TRUE(bit_equal(got.grads, ref.grads)) << mode << " dropout " << dropout << ": "
                                                   << first_difference(table, got.grads, ref.grads);
    }
    // With dropout on, the masks must matter (else the dropout half proves nothing).
    if (dropout > 0) {
      StepResult plain =
          run_step(small(0.0, "none"), table, params, tokens, targets, total, 2, T, 2, 100);
      EXPECT_NE(plain.loss, ref.loss);
    }
  }
}

TEST(ModelEquivalence, RecomputeModesBitIdentical) {
  check_recompute_modes([](ModelConfig c) { return c; });
}
TEST(ModelEquivalence, RecomputeModesBitIdenticalWithAttentionVariants) {
  check_recompute_modes(attention_variants);
}
// The grouped-query backward sums a kv head's query heads in a fixed order: repeated runs are
// bitwise equal.
TEST(ModelEquivalence, SameInputsSameThreadsBitIdenticalWithAttentionVariants) {
  expect_repeated_step_bit_identical(attention_variants(small_config(0.1)));
}
TEST(ModelEquivalence, RecomputeModesBitIdenticalNormVariants) {
  check_recompute_modes([](ModelConfig c) { return norm_variant(c, 1); });
  check_recompute_modes([](ModelConfig c) { return norm_variant(c, 2); });
  check_recompute_modes([](ModelConfig c) { return norm_variant(c, 3); });
}

// KV-cache decoding vs the full forward (training = false). Tolerance per position:
// max|a-b| <= 1e-5 + 1e-5 x max|ref| over the vocab_size logits. Both compute the same math in
// fp32 but the decoder's attention sums scores one query at a time in a different order from
// the batched kernel and uses 1-row GEMMs; differences are a few ulps of the O(1) activations
// propagated through 2 layers (measured <= 1.8e-6 on logits of magnitude ~3); a wrong cache index
// or position is O(0.1).
// Run for GPT-2's MLP width and for model.ffn_hidden = 40 (not 4C): the decoder runs the
// training forward's own block (gpt_block.h), so both widths go through one code path.
void check_decoder_against_forward(const ModelConfig& cfg) {
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params = random_params(table, 9);
  auto be = backend_create_cpu(2);
  GptModel model(cfg, table, *be, DType::kF32, DType::kF32);
  const int64_t T = cfg.block_size;  // the whole context
  std::vector<int32_t> tokens(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) tokens[t] = static_cast<int32_t>((13 * t + 5) % cfg.vocab_size);
  ForwardOptions fo;
  fo.training = false;
  model.forward(Tensor(params.data(), DType::kF32), tokens.data(), nullptr, 1, T, fo);
  const float* full = model.logits().as<float>();
  const int64_t Vp = cfg.padded_vocab();
  GptDecoder decoder(cfg, table, *be, Tensor(params.data(), DType::kF32));
  for (int pass = 0; pass < 2; ++pass) {  // the second pass checks reset()
    decoder.reset();
    double spread = 0.0;
    for (int64_t t = 0; t < T; ++t) {
      const float* step = decoder.step(tokens[t]);
      ASSERT_EQ(decoder.length(), t + 1);
      auto r = testing::compare_tensor("logits at position " + std::to_string(t), step,
                                       full + t * Vp, cfg.vocab_size, 1e-5, 1e-5);
      EXPECT_TRUE(r.ok) << "pass " << pass << ": " << r.message;
      // Token for token: greedy decoding picks the same next token either way.
      EXPECT_EQ(std::max_element(step, step + cfg.vocab_size) - step,
                std::max_element(full + t * Vp, full + t * Vp + cfg.vocab_size) - (full + t * Vp))
          << "position " << t;
      for (int64_t v = 0; v < cfg.vocab_size; ++v)
        spread = std::max(spread, static_cast<double>(std::fabs(full[t * Vp + v])));
    }
    EXPECT_GT(spread, 0.1) << "logits too small for the comparison to mean anything";
  }
  // A full context refuses one more token with an error.
  EXPECT_THROW(decoder.step(tokens[0]), Error);
}

TEST(ModelEquivalence, KvCacheDecoderMatchesForwardLogits) {
  check_decoder_against_forward(small_config());
  ModelConfig narrow = small_config();
  narrow.ffn_hidden = 40;
  check_decoder_against_forward(narrow);
}
TEST(ModelEquivalence, KvCacheDecoderMatchesForwardLogitsNormVariants) {
  for (int v : kNormVariants) {
    SCOPED_TRACE("norm variant " + std::to_string(v));
    check_decoder_against_forward(norm_variant(small_config(), v));
  }
}

// The block variants: accumulation splits within the tolerance of
// GradientAccumulationMatchesOneBigBatch (the same sums in another order), recompute modes bit for
// bit (the same ops replayed), with dropout so the replayed masks are checked too.
TEST(ModelEquivalence, MlpVariantsAndUntiedHeadAccumulateAndRecomputeIdentically) {
  for (const char* mlp : {"swiglu", "relu2"}) {
    const ModelConfig cfg = variant_config(mlp, 0.15);
    const ParamTable table = param_table_build(cfg);
    std::vector<float> params = random_params(table, 12);
    const int64_t T = 12, total = 4;
    std::vector<int32_t> tokens, targets;
    make_batch(total, T, cfg.vocab_size, &tokens, &targets);
    StepResult ref = run_step(cfg, table, params, tokens, targets, total, 4, T, 2, 100);
    StepResult split = run_step(cfg, table, params, tokens, targets, total, 1, T, 2, 100);
    EXPECT_NEAR(split.loss, ref.loss, 1e-6 * std::fabs(ref.loss)) << mlp;
    for (const ParamInfo& p : table.params) {
      auto r = testing::compare_tensor(p.name, split.grads.data() + p.offset,
                                       ref.grads.data() + p.offset, p.numel, 1e-5, 1e-4);
      EXPECT_TRUE(r.ok) << mlp << " B=1 A=4: " << r.message;
    }
    StepResult base = run_step(cfg, table, params, tokens, targets, total, 2, T, 2, 100);
    for (const char* mode : {"mlp", "block"}) {
      StepResult got = run_step(variant_config(mlp, 0.15, mode), table, params, tokens, targets,
                                total, 2, T, 2, 100);
      EXPECT_EQ(std::memcmp(&got.loss, &base.loss, sizeof(double)), 0)
          << mlp << " " << mode << ": loss " << got.loss << " vs " << base.loss;
      EXPECT_TRUE(bit_equal(got.grads, base.grads))
          << mlp << " " << mode << ": " << first_difference(table, got.grads, base.grads);
    }
  }
}

// The decoder runs the same block and head: SwiGLU's gate, the untied head and the soft-cap
// (sampling sees capped logits, as the full forward's logits() are), and ReLU^2.
TEST(ModelEquivalence, KvCacheDecoderMatchesForwardLogitsForMlpVariants) {
  check_decoder_against_forward(variant_config("swiglu"));
  check_decoder_against_forward(variant_config("relu2"));
}

// The decoder with rotary positions (each cached k rotated at its own position, the query at
// the new one), multi-query attention (a cache of one kv head) and all variants together.
TEST(ModelEquivalence, KvCacheDecoderMatchesForwardLogitsWithAttentionVariants) {
  ModelConfig rope = small_config();
  rope.position = "rope";
  check_decoder_against_forward(rope);
  ModelConfig mqa = small_config();
  mqa.n_kv_head = 1;
  check_decoder_against_forward(mqa);
  check_decoder_against_forward(attention_variants(small_config()));
}

}  // namespace
}  // namespace ledgerlm
