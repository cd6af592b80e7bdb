// The ledger's accuracy bar on real CPU runs of the tiny config: for every optimizer and
// recompute none/mlp/block, the planner's per-component prediction against the tracking
// allocator's measurement after a few training steps, and the tracked bytes against the
// process's RSS high-water mark (untracked bytes bounded).
#include <gtest/gtest.h>

#include <malloc.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "data/sha256.h"
#include "model/backend/cpu/cpu_gemm_bf16.h"
#include "model/backend/cpu/cpu_gemm_lib.h"
#include "model/backend/cpu/cpu_isa.h"
#include "model/base/rng.h"
#include "tests/support/config_test_support.h"
#include "train/ledger/ledger.h"
#include "train/step/model_state.h"
#include "train/step/train_step.h"

namespace ledgerlm {
namespace {

constexpr int kThreads = 2;

// configs/bench_tiny.toml: L4 H4 C128 T64 B12, vocab 65.
RunConfig tiny_config(const std::string& optim, const std::string& recompute) {
  RunConfig c =
      testing::shape_config({.vocab = 65, .L = 4, .H = 4, .C = 128, .block = 64, .T = 64, .B = 12});
  c.model.recompute = recompute;
  c.train.threads = kThreads;
  c.optim.name = optim;
  c.optim.lr = 1e-3;
  return c;
}

struct Measured {
  MemoryPlan plan;
  std::vector<LedgerRow> rows;
  MemUsage total;
  LedgerReconcile rec;
  int64_t row_peak(MemTag tag) const {
    for (const auto& r : rows)
      if (r.tag == tag) return r.peak;
    return 0;
  }
};

// A real in-process run: ModelState + GptModel, a few optimizer steps on random tokens. The RSS
// high-water mark is reset first so this run's growth is measured on its own.
// Uniform tokens (and targets) in [0, 65): micro-batch a of step s from rng (1, s*16 + a).
class RandomTokens final : public BatchSource {
 public:
  RandomTokens(int64_t B, int64_t T) : in_(static_cast<size_t>(B * T)), tg_(in_.size()) {}
  MicroBatch micro_batch(int64_t s, int64_t a) override {
    for (size_t i = 0; i < in_.size(); ++i) {
      auto bits = rng_bits(1, RngStream::kData, static_cast<uint64_t>(s * 16 + a), i);
      in_[i] = static_cast<int32_t>(bits[0] % 65);
      tg_[i] = static_cast<int32_t>(bits[1] % 65);
    }
    return {in_.data(), tg_.data(), 0};
  }

 private:
  std::vector<int32_t> in_, tg_;
};

// `at_end` runs inside the measured window after the last step (what a checkpoint does then).
Measured run_steps(const RunConfig& cfg, int steps,
                   const std::function<void(ModelState&)>& at_end = {}) {
  Measured m;
  m.plan = memory_plan_compute(plan_input_from_config(cfg, 1, kThreads, -1));
  // Free heap pages kept from earlier runs in this process would absorb this run's allocations
  // without raising the RSS: hand them back first, then restart the high-water mark.
  malloc_trim(0);
  const bool reset = ledger_reset_hwm();
  int64_t rss = -1, hwm = -1;
  process_rss_bytes(&rss, &hwm);
  {
    auto backend = backend_create_cpu(kThreads);
    ModelState state(cfg, *backend);
    state.init_weights(7);
    const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len;
    state.model().plan(B, T);
    RandomTokens batches(B, T);
    for (int s = 1; s <= steps; ++s) train_step(state, batches, s, cfg.optim.lr);
    if (at_end) at_end(state);
    m.rows = ledger_compare(m.plan, backend->tracker());
    m.total = backend->tracker().total();
    m.rec = ledger_reconcile(backend->tracker(), reset ? rss : -1);
  }
  return m;
}

bool is_model_state(MemTag t) {
  return t == MemTag::kParams || t == MemTag::kGrads || t == MemTag::kMaster ||
         t == MemTag::kOptimM || t == MemTag::kOptimV || t == MemTag::kOptimMomentum ||
         t == MemTag::kOptimCodes || t == MemTag::kOptimAbsmax || t == MemTag::kOptimFactored ||
         t == MemTag::kAverage;
}

// Each row the planner predicts (all but data, comm and other) within tol(tag) x its measured peak.
void check_rows(const Measured& m, const std::string& what,
                const std::function<double(MemTag)>& tol) {
  for (const LedgerRow& r : m.rows) {
    if (r.tag == MemTag::kData || r.tag == MemTag::kComm || r.tag == MemTag::kOther) continue;
    EXPECT_LE(std::fabs(static_cast<double>(r.predicted - r.peak)), tol(r.tag) * r.peak)
        << what << ": " << mem_tag_name(r.tag) << " predicted " << r.predicted << " measured peak "
        << r.peak;
  }
}
// Every planned row within 1% of its measured peak.
void check_rows_within_1pc(const Measured& m, const std::string& what) {
  check_rows(m, what, [](MemTag) { return 0.01; });
}

// The bar: model state within 1% (the planner counts the same padded layout, so it is
// exact in practice), activations and the total peak within 10%. Workspace (activation
// gradients + backend scratch) is held to 10% as well.
void check_bar(const Measured& m, const std::string& what) {
  check_rows(m, what, [](MemTag t) { return is_model_state(t) ? 0.01 : 0.10; });
  EXPECT_LE(std::fabs(static_cast<double>(m.plan.per_rank_peak - m.total.peak)),
            0.10 * m.total.peak)
      << what << ": peak predicted " << m.plan.per_rank_peak << " measured " << m.total.peak;
  EXPECT_GT(m.row_peak(MemTag::kActivations), 0) << what;
}

TEST(LedgerAccuracy, EveryOptimizerAndRecomputeModeOnTheTinyConfig) {
  for (const char* optim : {"sgd", "adamw", "lamb", "lars", "adafactor", "adamw8bit"}) {
    int64_t act[3] = {0, 0, 0}, pred[3] = {0, 0, 0};
    int i = 0;
    for (const char* rc : {"none", "mlp", "block"}) {
      const std::string what = std::string(optim) + "/" + rc;
      Measured m = run_steps(tiny_config(optim, rc), 1);
      check_bar(m, what);
      act[i] = m.row_peak(MemTag::kActivations);
      pred[i] = m.plan.per_rank_for_tag(MemTag::kActivations);
      ++i;
    }
    // recompute=block shows the measured drop the prediction says (within 10%).
    const double drop_measured = static_cast<double>(act[0] - act[2]);
    const double drop_predicted = static_cast<double>(pred[0] - pred[2]);
    EXPECT_GT(drop_measured, 0) << optim;
    EXPECT_LE(std::fabs(drop_measured - drop_predicted), 0.10 * drop_predicted) << optim;
    EXPECT_LT(act[1], act[0]) << optim;  // mlp drops the 4C-wide hidden activations
  }
}

// The block variants: SwiGLU's third matrix and kept gate, the untied head (its weight,
// gradient, master and optimizer state), the soft-cap (nothing kept), predicted as allocated.
TEST(LedgerAccuracy, MlpVariantsAndUntiedHead) {
  for (const char* rc : {"none", "mlp"}) {
    RunConfig cfg = tiny_config("adamw", rc);
    cfg.model.mlp = "swiglu";
    cfg.model.tie_embeddings = false;
    cfg.model.logit_softcap = 15.0;
    check_bar(run_steps(cfg, 1), std::string("swiglu untied/") + rc);
  }
  RunConfig cfg = tiny_config("adamw", "block");
  cfg.model.mlp = "relu2";
  check_bar(run_steps(cfg, 1), "relu2/block");
}

TEST(LedgerAccuracy, PrecisionAndAccumulationVariants) {
  // bf16 params with an fp32 master (and 16-bit GEMM operand widening), fp32 accumulation
  // gradients under accum > 1, master = none (fp32 optimizer view in workspace).
  struct Variant {
    const char* params;
    const char* grads;
    const char* master;
    int64_t accum;
  };
  for (Variant v : {Variant{"bf16", "bf16", "fp32", 1}, Variant{"bf16", "bf16", "fp32", 2},
                    Variant{"bf16", "bf16", "none", 1}, Variant{"fp32", "fp32", "fp32", 3}}) {
    RunConfig cfg = tiny_config("adamw", "none");
    cfg.precision.params = v.params;
    cfg.precision.grads = v.grads;
    cfg.precision.master = v.master;
    cfg.train.accum = v.accum;
    const std::string what = std::string(v.params) + "/" + v.grads + "/master " + v.master +
                             "/accum " + std::to_string(v.accum);
    check_bar(run_steps(cfg, 2), what);
  }
}

// optim.ema_half_life: the average of the weights (4 bytes per parameter) and, with fp32 params,
// the master it forces apart from the compute copy, each predicted to the byte.
TEST(LedgerAccuracy, WeightAverageAndItsMasterPredictedToTheByte) {
  for (const char* params : {"fp32", "bf16"}) {
    RunConfig cfg = tiny_config("adamw", "none");
    cfg.precision.params = params;
    cfg.optim.ema_half_life = 4096;
    const Measured m = run_steps(cfg, 2);
    check_bar(m, std::string("weight average/") + params);
    for (MemTag tag : {MemTag::kAverage, MemTag::kMaster}) {
      EXPECT_GT(m.row_peak(tag), 0) << params << ": " << mem_tag_name(tag);
      EXPECT_EQ(m.plan.per_rank_for_tag(tag), m.row_peak(tag))
          << params << ": " << mem_tag_name(tag);
    }
    EXPECT_EQ(m.row_peak(MemTag::kAverage), m.row_peak(MemTag::kMaster)) << params;
  }
}

TEST(LedgerAccuracy, Bf16Matmul) {
  // precision.matmul = bf16: the native kernel packs both GEMM operands into bf16 pairs, the
  // portable path keeps fp32 bf16-rounded copies; the planner predicts whichever this CPU runs
  // (same bar as above: workspace within 10%).
  for (const bool native : {true, false}) {
    if (native && !cpu::cpu_has_bf16_dot()) continue;
    cpu::cpu_set_bf16_dot_enabled(native);
    for (const char* params : {"fp32", "bf16"}) {
      RunConfig cfg = tiny_config("adamw", "none");
      cfg.precision.params = params;
      cfg.precision.grads = params;
      cfg.precision.matmul = "bf16";
      check_bar(run_steps(cfg, 2),
                std::string(native ? "native" : "portable") + " matmul bf16, params " + params);
    }
    cpu::cpu_set_bf16_dot_enabled(true);
  }
}

TEST(LedgerAccuracy, Bf16OptimizerState) {
  // precision.state = bf16: the parameter-shaped states (m, v, momentum, Adafactor's m and
  // vector V) take 2 bytes per element. The planner must predict exactly that (same bar as
  // above: model state within 1%), and the prediction must really be the halved figure.
  for (const char* optim : {"sgd", "adamw", "lamb", "lars", "adafactor"}) {
    RunConfig cfg = tiny_config(optim, "none");
    cfg.precision.state = "bf16";
    if (std::string(optim) == "adafactor") cfg.optim.adafactor_beta1 = 0.9;
    const Measured m = run_steps(cfg, 1);
    check_bar(m, std::string(optim) + "/state bf16");
    const int64_t E = m.plan.input.elements;
    const MemTag tag = (std::string(optim) == "sgd" || std::string(optim) == "lars")
                           ? MemTag::kOptimMomentum
                           : MemTag::kOptimM;
    EXPECT_EQ(m.plan.per_rank_for_tag(tag), 2 * E) << optim;
    EXPECT_EQ(m.row_peak(tag), 2 * E) << optim;
    for (const auto& c : m.plan.components) {
      if (c.tag == tag) {
        EXPECT_EQ(c.dtype, "bf16") << optim << " " << c.name;
      }
    }
  }
}

TEST(LedgerAccuracy, UntrackedBytesAreBounded) {
  // Growth of the RSS high-water mark over a run minus the tracker's peak: what was allocated
  // without a tag (allocator overhead, BLAS buffers, thread stacks, small vectors). The bound is
  // 4 MiB + 5% of the tracked peak (measured here: see the printed figures).
  // oneDNN's AVX2 matmul (`gemm:jit`, the avx2 path's library for some shapes) allocates its
  // packing buffers with malloc on every call, outside the scratchpad the backend gives it: up
  // to ~5.5 MB more at a warm run's peak on an AMD Zen 3, so that path gets 4 MiB more.
  // The first run in a process also pays what a library keeps for the process's life (JIT
  // kernels, primitive caches): ~6 MB more on that path (this cold run's untracked bytes minus a
  // warm run's), so there the cold run gets 12 MiB more. Other paths keep the tight bound.
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's shadow memory, redzones and quarantine land in RSS by design (~14 MB
  // here): the bound is about the real allocator, so it is checked in the normal build only.
  GTEST_SKIP() << "RSS under AddressSanitizer includes its shadow memory and quarantine";
#endif
  constexpr double kMiB = 1024.0 * 1024.0;
  const cpu::CpuIsa isa = cpu::cpu_isa_default();
  const bool onednn_gemm_jit =
      isa == cpu::CpuIsa::kAvx2 &&
      cpu::cpu_gemm_lib_choose(isa, 768, 128, 128, false, false) == cpu::GemmLib::kOneDnn;
  struct Case {
    const char* recompute;
    const char* when;
    double library_allowance;
  };
  const double warm = onednn_gemm_jit ? 4 * kMiB : 0.0;
  const double cold = onednn_gemm_jit ? 12 * kMiB : 0.0;
  for (const Case c :
       {Case{"none", "cold", cold}, Case{"none", "warm", warm}, Case{"block", "warm", warm}}) {
    Measured m = run_steps(tiny_config("adamw", c.recompute), 2);
    if (m.rec.rss_baseline < 0) GTEST_SKIP() << "cannot reset the RSS high-water mark here";
    std::printf("recompute %s (%s): tracked peak %lld, RSS growth %lld, untracked %lld bytes\n",
                c.recompute, c.when, static_cast<long long>(m.rec.tracked_peak),
                static_cast<long long>(m.rec.growth), static_cast<long long>(m.rec.untracked));
    const double bound =
        4.0 * kMiB + 0.05 * static_cast<double>(m.rec.tracked_peak) + c.library_allowance;
    EXPECT_LE(std::fabs(static_cast<double>(m.rec.untracked)), bound)
        << c.recompute << " " << c.when;
  }
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// Fine-tuning: frozen tensors get weights only (whole on the rank), trained ones weights,
// gradients, master and state; adapters add their own scratch. Every component is held to 1%
// here (the planner counts the same buffers: in practice exact), and the gradient and optimizer
// state bytes follow the trained tensors: LoRA's are a small fraction of full training's.
TEST(LedgerAccuracy, FullFreezeAndLoraFineTuning) {
  struct Variant {
    const char* what;
    const char* freeze;
    int64_t lora_rank;
    const char* params;
  };
  int64_t full_state = 0, full_acts = 0;
  for (Variant v :
       {Variant{"full", "", 0, "fp32"}, Variant{"freeze", "embed.*,block.[01].*", 0, "fp32"},
        Variant{"lora", "", 8, "fp32"}, Variant{"lora_bf16_base", "", 8, "bf16"}}) {
    RunConfig cfg = tiny_config("adamw", "none");
    cfg.train.freeze = v.freeze;
    cfg.model.lora.rank = v.lora_rank;
    cfg.model.lora.targets = "qkv,mlp_fc";
    cfg.model.lora.dropout = 0.1;
    cfg.precision.params = v.params;
    const Measured m = run_steps(cfg, 2);
    check_rows_within_1pc(m, v.what);
    const int64_t state = m.row_peak(MemTag::kOptimM) + m.row_peak(MemTag::kOptimV);
    const int64_t acts = m.row_peak(MemTag::kActivations);
    if (full_state == 0) {
      full_state = state;
      full_acts = acts;
    }
    // Frozen embeddings and blocks 0-1: no backward reaches them, so they keep no activations;
    // one shared set serves their forwards, so the arena shrinks by one block's share of 4.
    if (v.freeze[0] != '\0') {
      EXPECT_LT(acts, full_acts - full_acts / 8) << v.what;
    }
    if (v.lora_rank > 0) {
      // 4 layers x (qkv: 8 x 128 + 384 x 8, fc: 8 x 128 + 512 x 8) adapters, block-aligned,
      // against ~0.8M parameters.
      EXPECT_LT(state * 20, full_state) << v.what;
    }
    bool frozen_row = false;
    for (const PlanComponent& c : m.plan.components) frozen_row |= c.trainable == "frozen";
    EXPECT_EQ(frozen_row, v.freeze[0] != '\0' || v.lora_rank > 0) << v.what;
  }
}

// The attention variants (rotary positions: no wpe; 4 query heads on 2 kv heads: a qkv of
// 128 + 2 x 2 x 32 = 256 rather than 384; QK-norm's saved rstd) at the tiny config: every row
// predicted within 1% like the fine-tuning runs above (the lists are shared, so it is exact in
// practice), for AdamW and Muon (the fused qkv orthogonalised as 4 pieces of 64 rows), recompute
// none and block, LoRA on qkv; and the grouped-query arena really is the smaller one.
TEST(LedgerAccuracy, AttentionVariants) {
  struct Variant {
    const char* optim;
    const char* recompute;
    int64_t lora_rank;
  };
  int64_t gqa_acts = 0;
  for (Variant v :
       {Variant{"muon", "none", 0}, Variant{"adamw", "block", 0}, Variant{"adamw", "none", 8}}) {
    RunConfig cfg = tiny_config(v.optim, v.recompute);
    cfg.model.position = "rope";
    cfg.model.n_kv_head = 2;
    cfg.model.qk_norm = true;
    cfg.model.lora.rank = v.lora_rank;
    const std::string what =
        std::string(v.optim) + "/" + v.recompute + "/lora " + std::to_string(v.lora_rank);
    const Measured m = run_steps(cfg, 2);
    check_rows_within_1pc(m, what);
    if (gqa_acts == 0) gqa_acts = m.row_peak(MemTag::kActivations);
  }
  // Per block and row the qkv buffer is 256 floats instead of 384, plus 6 rstd values.
  const Measured gpt2 = run_steps(tiny_config("adamw", "none"), 1);
  EXPECT_LT(gqa_acts, gpt2.row_peak(MemTag::kActivations));
}

// Separate adapters on q, k and v (each its A (8, 128) and B of 128, 64 or 64 rows: 2 kv heads),
// o, gate, up and down of a Llama-style block (rotary, SwiGLU, RMSNorm, no biases), with adapter
// dropout: the parameters, gradients, optimizer state and activations are predicted to the byte;
// the workspace (with q, k and v's qkv x rank scratch, in workspace.model) was exact here too, but
// holds the GEMM library's CPU-dependent scratchpad, so 1% as above.
TEST(LedgerAccuracy, SeparateQkvAndGateAdaptersPredictedToTheByte) {
  RunConfig cfg = tiny_config("adamw", "none");
  cfg.model.position = "rope";
  cfg.model.n_kv_head = 2;
  cfg.model.mlp = "swiglu";
  cfg.model.norm = "rmsnorm";
  cfg.model.bias = false;
  cfg.model.lora.rank = 8;
  cfg.model.lora.targets = "q,k,v,o,gate,up,down";
  cfg.model.lora.dropout = 0.1;
  const Measured m = run_steps(cfg, 2);
  for (const LedgerRow& r : m.rows) {
    if (r.tag == MemTag::kData || r.tag == MemTag::kComm || r.tag == MemTag::kOther) continue;
    if (r.tag == MemTag::kWorkspace)  // the GEMM library's scratchpad is the CPU's: 1% as above
      EXPECT_LE(std::fabs(static_cast<double>(r.predicted - r.peak)), 0.01 * r.peak)
          << "workspace predicted " << r.predicted << " measured peak " << r.peak;
    else
      EXPECT_EQ(r.predicted, r.peak) << mem_tag_name(r.tag);
  }
}

// model.norm: RMSNorm without the mean buffers, weightless norms and no biases (an
// empty final unit with neither), Qwen2's q, k, v bias with a frozen block (its norm weights go
// to the gradient sink): every row within 1% of the measurement, as for frozen tensors above.
TEST(LedgerAccuracy, NormVariants) {
  struct Variant {
    const char* what;
    const char* norm;
    bool norm_weight, bias, qkv_bias;
    const char* freeze;
    const char* recompute;
  };
  for (Variant v :
       {Variant{"nanochat norm", "rmsnorm", false, false, false, "", "none"},
        Variant{"qwen2 norm, frozen block 0", "rmsnorm", true, false, true, "block.0.*", "block"},
        Variant{"bias-free layernorm", "layernorm", true, false, false, "", "mlp"}}) {
    RunConfig cfg = tiny_config("adamw", v.recompute);
    cfg.model.norm = v.norm;
    cfg.model.norm_weight = v.norm_weight;
    cfg.model.bias = v.bias;
    cfg.model.qkv_bias = v.qkv_bias;
    cfg.train.freeze = v.freeze;
    const Measured m = run_steps(cfg, 2);
    check_rows_within_1pc(m, v.what);
    EXPECT_GT(m.row_peak(MemTag::kActivations), 0) << v.what;
  }
}

// train.gns at world 1 x accum 4 keeps the step's gradient sum beside each micro-batch's: the
// plan names that buffer (workspace.gns, the gradients' size) and the measured workspace grows by
// exactly its bytes; without train.gns there is no such component.
TEST(LedgerAccuracy, GnsMicroBatchBufferPredictedAndMeasured) {
  RunConfig cfg = tiny_config("adamw", "none");
  cfg.train.micro_batch = 3;
  cfg.train.accum = 4;
  const Measured off = run_steps(cfg, 1);
  cfg.train.gns = true;
  const Measured on = run_steps(cfg, 1);
  check_bar(on, "gns");
  auto component = [](const MemoryPlan& plan, const std::string& name) -> int64_t {
    for (const PlanComponent& c : plan.components)
      if (c.name == name) return c.per_rank_bytes;
    return -1;
  };
  const int64_t buffer = component(on.plan, "workspace.gns");
  std::printf("workspace.gns: predicted %lld bytes (grads %lld); measured workspace %lld -> %lld\n",
              static_cast<long long>(buffer), static_cast<long long>(component(on.plan, "grads")),
              static_cast<long long>(off.row_peak(MemTag::kWorkspace)),
              static_cast<long long>(on.row_peak(MemTag::kWorkspace)));
  EXPECT_EQ(component(off.plan, "workspace.gns"), -1);
  EXPECT_EQ(buffer, component(on.plan, "grads"));
  EXPECT_EQ(on.row_peak(MemTag::kWorkspace) - off.row_peak(MemTag::kWorkspace), buffer);
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// A LoRA run's checkpoint records the SHA-256 of the frozen base weights. The hash must stream
// them through a bounded buffer: a whole host copy is a second base model outside the ledger
// (the RSS peak then exceeds the ledger's by the base model's size). The frozen weights here are
// ~57 MB (L8 C384), far above the bound's 4 MiB + 5% of the tracked peak (+ the oneDNN path's
// allowance), so a whole copy fails it; the hash must be that of the same bytes, in frozen-table
// order, as a whole copy gives (checkpoints written before keep resuming).
TEST(LedgerAccuracy, LoraFrozenHashAtCheckpointStaysWithinTheLedger) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "RSS under AddressSanitizer includes its shadow memory and quarantine";
#endif
  constexpr double kMiB = 1024.0 * 1024.0;
  RunConfig cfg = tiny_config("adamw", "none");
  cfg.model.n_layer = 8;
  cfg.model.n_embd = 384;
  cfg.model.n_head = 6;
  cfg.train.micro_batch = 2;
  cfg.model.lora.rank = 8;
  cfg.model.lora.targets = "qkv,mlp_fc";
  std::string streamed, whole;
  int64_t frozen_bytes = 0;
  const Measured m = run_steps(cfg, 1, [&](ModelState& state) {
    streamed = state.frozen_sha256();
    frozen_bytes = state.frozen_table().total * 4;
  });
  if (m.rec.rss_baseline < 0) GTEST_SKIP() << "cannot reset the RSS high-water mark here";
  std::printf("lora: frozen %lld bytes, tracked peak %lld, RSS growth %lld, untracked %lld\n",
              static_cast<long long>(frozen_bytes), static_cast<long long>(m.rec.tracked_peak),
              static_cast<long long>(m.rec.growth), static_cast<long long>(m.rec.untracked));
  ASSERT_GT(frozen_bytes, 48 * kMiB) << "the case must be big enough for a copy to show";
  const cpu::CpuIsa isa = cpu::cpu_isa_default();
  const bool onednn_gemm_jit =
      isa == cpu::CpuIsa::kAvx2 &&
      cpu::cpu_gemm_lib_choose(isa, 768, 128, 128, false, false) == cpu::GemmLib::kOneDnn;
  const double bound = 4.0 * kMiB + 0.05 * static_cast<double>(m.rec.tracked_peak) +
                       (onednn_gemm_jit ? 12 * kMiB : 0.0);
  EXPECT_LE(std::fabs(static_cast<double>(m.rec.untracked)), bound);

  // The same digest as the whole buffer's, computed outside the measured window.
  auto backend = backend_create_cpu(kThreads);
  ModelState state(cfg, *backend);
  state.init_weights(7);
  std::string bytes(static_cast<size_t>(state.frozen_table().total) * 4, '\0');
  backend->copy_to_host(bytes.data(), state.frozen(), state.frozen_table().total);
  whole = sha256_hex(bytes);
  EXPECT_EQ(state.frozen_sha256(), whole);
  EXPECT_EQ(streamed, whole) << "the frozen weights do not change in training";
}

}  // namespace
}  // namespace ledgerlm
