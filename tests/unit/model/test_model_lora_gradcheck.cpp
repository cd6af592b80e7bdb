// Gradient check of low-rank adapters (LoRA) and of frozen tensors: GptModel::backward against
// central finite differences of the mean cross-entropy, in fp64, for every element of every
// TRAINED tensor of a tiny GPT (vocab 11, L2 H2 C8, block 6, B2 T5), while frozen tensors get no
// gradient at all. The trained tensors sit in the trained part's buffer and the frozen ones in
// the frozen part's (param_table_part), as a training run lays them out.
//
// Variants: adapters on all four linear layers (rank 2, alpha 3: scale 1.5 != 1, so a missing
// scale factor shows), with and without adapter dropout and model dropout, recompute none / mlp
// / block; and train.freeze of the embeddings and block 0 (backward stops above block 0). A
// Llama-style block (rotary, 4 query heads on 2 kv heads, SwiGLU, RMSNorm, no biases) with
// separate adapters on q, k, v (each on its row block of the fused qkv projection: 8, 4 and 4
// rows), o, gate, up and down.
//
// The gradient checks are instantiated per backend name (tests/support/host_staging.h): cpu
// (label unit; the guard backend in the guard re-run, on a subset of elements as in
// test_model_gradcheck.cpp) and, in a CUDA build, cuda (label cuda, "skipped: no CUDA device"
// without one), the trained, frozen and gradient buffers staged into the backend's memory.
//
// Parameters are N(0, 0.4) everywhere (norm weights 1 + N(0, 0.2)), B factors included: the
// zero init of B would make dA vanish and hide a wrong dA formula.
//
// Tolerance per tensor: max|analytic - numeric| <= 1e-7 + 1e-5 x max|numeric|, h = 1e-6, the
// whole-model check's bound and reasoning (test_model_gradcheck.cpp): truncation ~1e-12,
// rounding ~5e-10 per element, a wrong term of the order of the gradient itself.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/rng.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "model/unit_access.h"
#include "tests/support/gradcheck_support.h"
#include "tests/support/host_staging.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

constexpr double kH = 1e-6;
constexpr double kAtol = 1e-7;
constexpr double kRtol = 1e-5;

struct Case {
  const char* name;
  int64_t lora_rank;
  double lora_dropout, dropout;
  const char* recompute;
  const char* freeze;
  // Llama-style block with Llama's module names as targets (see above).
  bool llama = false;
};

ModelConfig config_of(const Case& c) {
  ModelConfig m;
  m.vocab_size = 11;
  m.n_layer = 2;
  m.n_head = 2;
  m.n_embd = 8;
  m.block_size = 6;
  m.dropout = c.dropout;
  m.recompute = c.recompute;
  m.lora.rank = c.lora_rank;
  m.lora.alpha = 1.5 * static_cast<double>(c.lora_rank);
  m.lora.dropout = c.lora_dropout;
  m.lora.targets = "qkv,attn_proj,mlp_fc,mlp_proj";
  if (c.llama) {
    m.n_head = 4;
    m.n_kv_head = 2;
    m.position = "rope";
    m.mlp = "swiglu";
    m.ffn_hidden = 12;
    m.norm = "rmsnorm";
    m.bias = false;
    m.lora.targets = "q,k,v,o,gate,up,down";
  }
  return m;
}

// The Llama-style case's table: q, k and v have adapters of their own (B over their rows only)
// and the gate has one; there is no fused qkv adapter.
void expect_separate_sites(const ParamTable& full) {
  for (const char* stem : {"attn.q", "attn.k", "attn.v", "mlp.gate"})
    EXPECT_GE(full.index_of(std::string("block.1.") + stem + ".lora_b"), 0) << stem;
  EXPECT_LT(full.index_of("block.0.attn.qkv.lora_a"), 0);
  EXPECT_EQ(full.find("block.0.attn.q.lora_b").shape[0], 8);  // C
  EXPECT_EQ(full.find("block.0.attn.v.lora_b").shape[0], 4);  // 2 kv heads x head_dim 2
  EXPECT_EQ(full.find("block.0.attn.v.lora_b").lora_row0, 12);
}

double random_value(const ParamInfo& info, int64_t full_index, int64_t i) {
  auto bits = rng_bits(77, RngStream::kInit, 1000 + static_cast<uint64_t>(full_index),
                       static_cast<uint64_t>(i));
  const double z = rng_normal(bits[0], bits[1]);
  return info.kind == ParamKind::kNormWeight ? 1.0 + 0.2 * z : 0.4 * z;
}

// One part's flat buffer, vocab padding rows zero.
std::vector<double> fill(const ParamTable& part) {
  std::vector<double> v(static_cast<size_t>(part.total), 0.0);
  for (const ParamInfo& p : part.params) {
    const int64_t cols = p.numel / p.shape[0];
    const int64_t rows = p.kind == ParamKind::kEmbedding ? p.hf_rows : p.shape[0];
    for (int64_t i = 0; i < p.numel && i / cols < rows; ++i)
      v[static_cast<size_t>(p.offset + i)] = random_value(p, p.full_index, i);
  }
  return v;
}

void run_case(Backend& be, testing::HostStaging& stage, const Case& c) {
  SCOPED_TRACE(c.name);
  const ModelConfig cfg = config_of(c);
  ParamTable full = param_table_build(cfg);
  if (c.freeze[0] != '\0') param_table_freeze(&full, c.freeze);
  if (c.llama) expect_separate_sites(full);
  const ParamTable trained = param_table_part(full, true, full.options);
  const ParamTable frozen = param_table_part(full, false, full.options);
  ASSERT_FALSE(frozen.params.empty());
  GptModel model(cfg, full, be, DType::kF64, DType::kF64, DType::kF64);
  const int64_t B = 2, T = 5;
  std::vector<int32_t> tokens, targets;
  testing::gradcheck_batch(B * T, cfg.vocab_size, &tokens, &targets);
  ForwardOptions fo;
  fo.seed = 4242;
  fo.step = 3;

  std::vector<double> params = fill(trained), frozen_values = fill(frozen);
  std::vector<double> grads(params.size(), 0.0);
  // Backend copies of the host vectors; loss() uploads the (perturbed) trained values again into
  // the same buffer, so the units keep pointing at them.
  const Tensor pt = stage.up(params), gt = stage.up(grads), ft = stage.up(frozen_values);
  FlatUnits units(trained, pt, gt, &frozen, ft);
  auto loss = [&] {
    stage.up(params);
    return model.forward(units, tokens.data(), targets.data(), B, T, fo);
  };
  const double loss0 = loss();
  ASSERT_TRUE(std::isfinite(loss0));
  model.backward(units, 1.0);
  stage.down(grads);
  if (c.lora_dropout > 0) {  // the adapter masks are active
    ForwardOptions other = fo;
    other.seed = fo.seed + 1;
    EXPECT_NE(model.forward(units, tokens.data(), targets.data(), B, T, other), loss0);
  }

  // Guard: each tensor's first 8 elements and every 8th after (test_model_gradcheck.cpp).
  const int64_t stride = be.name() == "guard" ? 8 : 1;
  for (const ParamInfo& info : trained.params) {
    std::vector<double> numeric, analytic;
    testing::central_differences(info, stride, kH, params, grads, loss, &numeric, &analytic);
    auto r = testing::compare_tensor(info.name, analytic.data(), numeric.data(),
                                     static_cast<int64_t>(numeric.size()), kAtol, kRtol);
    EXPECT_TRUE(r.ok) << be.name() << ": " << r.message;
    double max_abs = 0.0;
    for (double v : numeric) max_abs = std::max(max_abs, std::fabs(v));
    // The embeddings' padding-free tensors and every adapter factor influence the loss.
    EXPECT_GT(max_abs, 1e-5) << info.name << ": numeric gradient is (nearly) zero";
  }
}

using ModelLoraGradCheck = testing::OnNamedBackend;
using ModelFreezeGradCheck = testing::OnNamedBackend;

TEST_P(ModelLoraGradCheck, AllTargetsFp64) {
  run_case(*be, *stage, {"lora", 2, 0.0, 0.0, "none", ""});
}
TEST_P(ModelLoraGradCheck, AdapterDropoutAndModelDropoutFp64) {
  run_case(*be, *stage, {"lora+dropout", 2, 0.3, 0.2, "none", ""});
}
TEST_P(ModelLoraGradCheck, RecomputeMlpWithDropoutFp64) {
  run_case(*be, *stage, {"lora+mlp", 2, 0.3, 0.2, "mlp", ""});
}
TEST_P(ModelLoraGradCheck, RecomputeBlockWithDropoutFp64) {
  run_case(*be, *stage, {"lora+block", 2, 0.3, 0.2, "block", ""});
}
TEST_P(ModelLoraGradCheck, SeparateQkvGateUpDownOnGroupedQuerySwigluFp64) {
  run_case(*be, *stage, {"lora-llama", 2, 0.0, 0.0, "none", "", true});
}
TEST_P(ModelLoraGradCheck, SeparateQkvGateWithDropoutAndRecomputeBlockFp64) {
  run_case(*be, *stage, {"lora-llama+dropout", 2, 0.3, 0.0, "block", "", true});
}
TEST_P(ModelFreezeGradCheck, EmbeddingsAndFirstBlockFrozenFp64) {
  run_case(*be, *stage, {"freeze", 0, 0.0, 0.2, "none", "embed.*,block.0.*"});
}
TEST_P(ModelFreezeGradCheck, HfNamesAndRecomputeBlockFp64) {
  run_case(*be, *stage,
           {"freeze-hf", 0, 0.0, 0.0, "block", "transformer.h.1.mlp.*,transformer.ln_f.*"});
}

INSTANTIATE_TEST_SUITE_P(Fp64, ModelLoraGradCheck,
                         ::testing::ValuesIn(testing::cpu_and_cuda_backends()),
                         testing::backend_param_name);
INSTANTIATE_TEST_SUITE_P(Fp64, ModelFreezeGradCheck,
                         ::testing::ValuesIn(testing::cpu_and_cuda_backends()),
                         testing::backend_param_name);

// With B = 0 (its init) the adapted model is the base model exactly, and the adapters' forward
// equals the merged weight W + (alpha / r) B A (the export's merge) to rounding.
void check_zero_b_and_merge(const Case& c) {
  SCOPED_TRACE(c.name);
  const ModelConfig cfg = config_of(c);
  const ParamTable full = param_table_build(cfg);
  if (c.llama) expect_separate_sites(full);
  const ParamTable trained = param_table_part(full, true, full.options);
  const ParamTable frozen = param_table_part(full, false, full.options);
  ModelConfig plain_cfg = cfg;
  plain_cfg.lora = LoraConfig();
  const ParamTable plain = param_table_build(plain_cfg);
  auto be = backend_create_cpu(2);
  GptModel model(cfg, full, *be, DType::kF64, DType::kF64, DType::kF64);
  GptModel base(plain_cfg, plain, *be, DType::kF64, DType::kF64, DType::kF64);
  std::vector<double> a = fill(trained), f = fill(frozen);
  std::vector<int32_t> tokens{1, 2, 3, 4, 5, 6, 7, 8, 9, 10},
      targets{2, 3, 4, 5, 6, 7, 8, 9, 10, 0};
  // The base model's flat buffer from the frozen part (every base tensor is frozen).
  std::vector<double> base_values(static_cast<size_t>(plain.total), 0.0);
  for (const ParamInfo& p : frozen.params) {
    const ParamInfo& q = plain.find(p.name);
    for (int64_t i = 0; i < p.numel; ++i)
      base_values[static_cast<size_t>(q.offset + i)] = f[static_cast<size_t>(p.offset + i)];
  }
  auto lora_loss = [&] {
    FlatUnits units(trained, Tensor(a.data(), DType::kF64), Tensor(), &frozen,
                    Tensor(f.data(), DType::kF64));
    return model.forward(units, tokens.data(), targets.data(), 2, 5, {});
  };
  auto base_loss = [&] {
    return base.forward(Tensor(base_values.data(), DType::kF64), tokens.data(), targets.data(), 2,
                        5, {});
  };
  std::vector<double> saved = a;
  for (const ParamInfo& p : trained.params)
    if (p.lora == ParamInfo::Lora::kB)
      for (int64_t i = 0; i < p.numel; ++i) a[static_cast<size_t>(p.offset + i)] = 0.0;
  const double zero_b = lora_loss();
  EXPECT_EQ(zero_b, base_loss()) << "B = 0 must leave the base model's loss bit for bit";
  a = saved;
  const double adapted = lora_loss();
  EXPECT_GT(std::fabs(adapted - zero_b), 1e-3) << "the adapters must change the loss";
  // Merge by hand: W[row0 + o] += scale * (B A)[o] for every adapter, on the base weight and
  // rows the table names (q, k and v's own adapters: their row blocks of the fused qkv).
  const double scale = cfg.lora.scale();
  for (const ParamInfo& pa : trained.params) {
    if (pa.lora != ParamInfo::Lora::kA) continue;
    const std::string stem = pa.name.substr(0, pa.name.size() - 7);  // drop ".lora_a"
    const ParamInfo& pb = trained.find(stem + ".lora_b");
    const ParamInfo& fa = full.find(pa.name);
    const ParamInfo& w = plain.find(full.params[static_cast<size_t>(fa.lora_base)].name);
    const int64_t rows = pb.shape[0], in = w.shape[1], r = pa.shape[0], row0 = fa.lora_row0;
    for (int64_t o = 0; o < rows; ++o)
      for (int64_t i = 0; i < in; ++i) {
        double s = 0;
        for (int64_t k = 0; k < r; ++k)
          s += a[static_cast<size_t>(pb.offset + o * r + k)] *
               a[static_cast<size_t>(pa.offset + k * in + i)];
        base_values[static_cast<size_t>(w.offset + (row0 + o) * in + i)] += scale * s;
      }
  }
  EXPECT_NEAR(adapted, base_loss(), 1e-12 * std::fabs(adapted))
      << "merged weights must give the adapted model's loss (fp64: reassociation only)";
}

TEST(ModelLora, ZeroBIsTheBaseModelAndMergeMatches) {
  check_zero_b_and_merge({"merge", 3, 0.0, 0.0, "none", ""});
}
TEST(ModelLora, SeparateQkvAndGateMergeOnTheirRowsMatches) {
  check_zero_b_and_merge({"merge-llama", 3, 0.0, 0.0, "none", "", true});
}

}  // namespace
}  // namespace ledgerlm
