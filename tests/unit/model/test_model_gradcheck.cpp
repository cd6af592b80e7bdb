// Whole-model gradient check: GptModel::backward against central finite differences of
// GptModel::forward's mean cross-entropy, in fp64 (activations, parameters and gradients), for
// EVERY parameter element of a tiny GPT (vocab 11 padded to 64, L2 H2 C8, block 6, B2 T5).
//
// Instantiated per backend name (tests/support/host_staging.h): cpu (label unit; the guard
// backend in the guard re-run) and, in a CUDA build, cuda (label cuda, "skipped: no CUDA device"
// without one): parameters and gradients live in the backend's memory, staged from the host
// vectors the finite differences perturb, so the same bound holds the device's fp64 path.
//
// Variants: plain; an MLP width (model.ffn_hidden) other than 4C; SwiGLU and ReLU^2 MLPs
// (model.mlp); an untied head and the logit soft-cap; dropout 0.2 (masks are pure
// functions of (seed, site), so every forward of the finite difference sees the same masks);
// recompute = mlp and block (with dropout, so the recomputed forwards must replay the masks too);
// the attention variants (rotary positions, multi-query, QK-norm with grouped-query attention).
//
// Parameters are not the GPT-2 init (std 0.02, ones, zeros) but N(0, 0.4) everywhere (norm
// weights 1 + N(0, 0.2)): small weights would make the deep gradients tiny and let a wrong
// term hide below the tolerance, and unit norm weights / zero biases would hide terms that
// multiply them.
//
// Tolerance per tensor: max|analytic - numeric| <= 1e-7 + 1e-5 x max|numeric|, h = 1e-6.
// The central difference has truncation error O(h^2 f''') ~ 1e-12 and rounding error about
// eps x |loss| / h ~ 2e-16 x 2.5 / 1e-6 ~ 5e-10 per element (the forward's own rounding noise,
// a few ulps of the loss, is of the same order), far below the bound (measured max 1e-9); a wrong
// term in a backward formula is of the order of the gradient itself (1e-3 .. 1).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/rng.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "tests/support/gradcheck_support.h"
#include "tests/support/host_staging.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

constexpr double kH = 1e-6;
constexpr double kAtol = 1e-7;
constexpr double kRtol = 1e-5;

ModelConfig tiny_config(double dropout, const std::string& recompute) {
  ModelConfig c;
  c.vocab_size = 11;  // padded to 64: the padding columns must get no gradient signal
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 8;
  c.block_size = 6;
  c.dropout = dropout;
  c.recompute = recompute;
  return c;
}

// Random parameters (see the file comment); vocab padding rows stay zero like the real init.
void fill_params(const ParamTable& table, std::vector<double>& p, uint64_t seed) {
  p.assign(static_cast<size_t>(table.total), 0.0);
  for (size_t pi = 0; pi < table.params.size(); ++pi) {
    const ParamInfo& info = table.params[pi];
    const int64_t cols = info.numel / info.shape[0];
    const int64_t rows = info.kind == ParamKind::kEmbedding ? info.hf_rows : info.shape[0];
    for (int64_t i = 0; i < info.numel; ++i) {
      if (i / cols >= rows) continue;
      auto bits = rng_bits(seed, RngStream::kInit, 1000 + pi, static_cast<uint64_t>(i));
      double z = rng_normal(bits[0], bits[1]);
      p[static_cast<size_t>(info.offset + i)] =
          info.kind == ParamKind::kNormWeight ? 1.0 + 0.2 * z : 0.4 * z;
    }
  }
}

struct GradCheckCase {
  double dropout;
  const char* recompute;
  int64_t ffn_hidden = 0;  // model.ffn_hidden (0: 4C)
  // MLP variants, the head and its soft-cap.
  const char* mlp = "gelu";
  bool tie_embeddings = true;
  double logit_softcap = 0.0;
  // Attention variants: model.position, n_head (the tiny model's 2 unless set), n_kv_head,
  // qk_norm.
  const char* position = "learned";
  int64_t n_head = 2;
  int64_t n_kv_head = 0;
  bool qk_norm = false;
  // model.norm: the norms and biases.
  const char* norm = "layernorm";
  bool norm_weight = true;
  double norm_eps = 1e-5;
  bool bias = true;
  bool qkv_bias = false;
};

void run_gradcheck(Backend& be, testing::HostStaging& stage, const GradCheckCase& tc) {
  ModelConfig cfg = tiny_config(tc.dropout, tc.recompute);
  cfg.ffn_hidden = tc.ffn_hidden;
  cfg.mlp = tc.mlp;
  cfg.tie_embeddings = tc.tie_embeddings;
  cfg.logit_softcap = tc.logit_softcap;
  cfg.position = tc.position;
  cfg.n_head = tc.n_head;
  cfg.n_kv_head = tc.n_kv_head;
  cfg.qk_norm = tc.qk_norm;
  cfg.norm = tc.norm;
  cfg.norm_weight = tc.norm_weight;
  cfg.norm_eps = tc.norm_eps;
  cfg.bias = tc.bias;
  cfg.qkv_bias = tc.qkv_bias;
  const ParamTable table = param_table_build(cfg);
  GptModel model(cfg, table, be, DType::kF64, DType::kF64, DType::kF64);
  const int64_t B = 2, T = 5;
  std::vector<int32_t> tokens, targets;
  testing::gradcheck_batch(B * T, cfg.vocab_size, &tokens, &targets);
  ForwardOptions fo;
  fo.training = true;
  fo.seed = 4242;
  fo.step = 3;

  std::vector<double> params;
  fill_params(table, params, 99);
  std::vector<double> grads(params.size(), 0.0);
  // The loss at the current host parameters (uploaded first: on a device backend the model
  // reads backend memory only).
  auto loss_at = [&](const ForwardOptions& o) {
    return model.forward(stage.up(params), tokens.data(), targets.data(), B, T, o);
  };
  const double loss0 = loss_at(fo);
  ASSERT_TRUE(std::isfinite(loss0));
  model.backward(stage.up(params), stage.up(grads), 1.0);
  stage.down(grads);

  // With dropout, a different seed must change the loss (the masks really are active).
  if (tc.dropout > 0) {
    ForwardOptions other = fo;
    other.seed = fo.seed + 1;
    EXPECT_NE(loss_at(other), loss0);
  }

  // The guard backend runs the CPU's arithmetic (checked in full by the cpu instance) behind
  // guarded memory, each op opening every buffer: there the check takes each tensor's first 8
  // elements and every 8th after (a sixth of the forwards), enough to prove that nothing reads
  // backend memory from the host, at CI cost of seconds instead of half a minute.
  const int64_t stride = be.name() == "guard" ? 8 : 1;
  for (const ParamInfo& info : table.params) {
    std::vector<double> numeric, analytic;
    testing::central_differences(
        info, stride, kH, params, grads, [&] { return loss_at(fo); }, &numeric, &analytic);
    auto r = testing::compare_tensor(info.name, analytic.data(), numeric.data(),
                                     static_cast<int64_t>(numeric.size()), kAtol, kRtol);
    EXPECT_TRUE(r.ok) << be.name() << " dropout " << tc.dropout << " recompute " << tc.recompute
                      << ": " << r.message;
    // Every tensor of this model influences the loss: an all-zero numeric gradient would mean
    // the check proves nothing for it.
    double max_abs = 0.0;
    for (double v : numeric) max_abs = std::max(max_abs, std::fabs(v));
    EXPECT_GT(max_abs, 1e-4) << info.name << ": numeric gradient is (nearly) zero";
  }
  // The vocab padding rows of the tied embedding get exactly zero gradient (no token or
  // target uses them and the padded logits carry no probability mass).
  const ParamInfo& wte = table.find("embed.wte");
  for (int64_t i = cfg.vocab_size * cfg.n_embd; i < wte.numel; ++i)
    ASSERT_EQ(grads[static_cast<size_t>(wte.offset + i)], 0.0) << "embed.wte padding element " << i;
  // So do the untied head's (model.tie_embeddings = false).
  if (!cfg.tie_embeddings) {
    const ParamInfo& head = table.find("final.lm_head");
    for (int64_t i = cfg.vocab_size * cfg.n_embd; i < head.numel; ++i)
      ASSERT_EQ(grads[static_cast<size_t>(head.offset + i)], 0.0) << "lm_head padding " << i;
  }
}

using ModelGradCheck = testing::OnNamedBackend;

TEST_P(ModelGradCheck, PlainFp64) {
  run_gradcheck(*be, *stage, {0.0, "none"});
}
TEST_P(ModelGradCheck, DropoutFp64) {
  run_gradcheck(*be, *stage, {0.2, "none"});
}
TEST_P(ModelGradCheck, RecomputeMlpWithDropoutFp64) {
  run_gradcheck(*be, *stage, {0.2, "mlp"});
}
TEST_P(ModelGradCheck, RecomputeBlockWithDropoutFp64) {
  run_gradcheck(*be, *stage, {0.2, "block"});
}
TEST_P(ModelGradCheck, RecomputeMlpFp64) {
  run_gradcheck(*be, *stage, {0.0, "mlp"});
}
TEST_P(ModelGradCheck, RecomputeBlockFp64) {
  run_gradcheck(*be, *stage, {0.0, "block"});
}
// model.ffn_hidden: an MLP 12 wide (not 4C = 32), with recompute = mlp replaying it.
TEST_P(ModelGradCheck, MlpWidthOtherThan4CFp64) {
  run_gradcheck(*be, *stage, {0.0, "none", 12});
  run_gradcheck(*be, *stage, {0.2, "mlp", 12});
}

// MLP variants: SwiGLU (gate, up, down; width 12), plain and under recompute = mlp with dropout
// (which replays the gate); ReLU^2 under recompute = mlp with dropout. (Recompute = block replays
// the same forward: tests/unit/model/test_model_equivalence.cpp holds it to the bit.)
TEST_P(ModelGradCheck, MlpSwigluFp64) {
  run_gradcheck(*be, *stage, {0.0, "none", 12, "swiglu"});
  run_gradcheck(*be, *stage, {0.2, "mlp", 12, "swiglu"});
}
TEST_P(ModelGradCheck, MlpRelu2Fp64) {
  run_gradcheck(*be, *stage, {0.2, "mlp", 0, "relu2"});
}
// The untied head (its own lm_head in the final unit) with the logit soft-cap at 1.5: the
// logits of N(0, 0.4) weights reach several units, so tanh works well inside its bend.
TEST_P(ModelGradCheck, UntiedHeadWithLogitSoftcapFp64) {
  run_gradcheck(*be, *stage, {0.0, "none", 0, "gelu", false, 1.5});
}

// Attention variants (each about a second of CI): model.position = rope alone (no wpe; q and k
// rotated, hd 4); multi-query attention (2 query heads on 1 kv head: its gradient sums both);
// and everything together with dropout and block recompute: QK-norm (its backward runs on the
// rotated values, then the inverse rotation), rope, 4 query heads on 2 kv heads.
TEST_P(ModelGradCheck, RotaryPositionsFp64) {
  run_gradcheck(*be, *stage, {0.0, "none", 0, "gelu", true, 0.0, "rope"});
}
TEST_P(ModelGradCheck, MultiQueryAttentionFp64) {
  run_gradcheck(*be, *stage, {0.0, "none", 0, "gelu", true, 0.0, "learned", 2, 1});
}
TEST_P(ModelGradCheck, QkNormRopeGroupedQueryWithDropoutAndRecomputeFp64) {
  run_gradcheck(*be, *stage, {0.2, "block", 0, "gelu", true, 0.0, "rope", 4, 2, true});
}

// model.norm: RMSNorm with a weight, eps 1e-2 (large enough that a misplaced eps
// moves the gradients), no biases but the q, k, v one (Qwen2); then nanochat's weightless RMSNorm
// without any bias, with recompute = block and dropout replaying it.
TEST_P(ModelGradCheck, RmsNormNoBiasQkvBiasFp64) {
  GradCheckCase tc{0.0, "none"};
  tc.norm = "rmsnorm";
  tc.norm_eps = 1e-2;
  tc.bias = false;
  tc.qkv_bias = true;
  run_gradcheck(*be, *stage, tc);
  tc.norm_weight = false;
  tc.qkv_bias = false;
  tc.dropout = 0.2;
  tc.recompute = "block";
  run_gradcheck(*be, *stage, tc);
}
// LayerNorm without bias (model.bias = false), eps 1e-2, recompute = mlp replaying the MLP (a
// weightless LayerNorm is the op-level check's, tests/backend/test_ops_gradcheck.cpp).
TEST_P(ModelGradCheck, LayerNormWithoutBiasFp64) {
  GradCheckCase tc{0.0, "mlp"};
  tc.norm_eps = 1e-2;
  tc.bias = false;
  run_gradcheck(*be, *stage, tc);
}

INSTANTIATE_TEST_SUITE_P(Fp64, ModelGradCheck,
                         ::testing::ValuesIn(testing::cpu_and_cuda_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ledgerlm
