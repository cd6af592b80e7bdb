// The planner's worked figures (exact, GB = 1e9 bytes). The `ledgerlm memory` command that prints
// them: tests/e2e/test_memory_command.cpp.
#include <gtest/gtest.h>

#include "train/ledger/memory_plan.h"

namespace ledgerlm {
namespace {

// The recipe of the worked figures: bf16 weights + bf16 grads + fp32 master + fp32 AdamW m, v,
// a model of exactly N parameters (no table, so no padding), one micro-batch per step.
PlanInput recipe(int64_t n) {
  PlanInput in;
  in.num_params = n;
  in.elements = n;
  in.params = DType::kBF16;
  in.grads = DType::kBF16;
  in.separate_master = true;
  in.optim.name = "adamw";
  in.cpu_workspace = false;
  return in;
}

int64_t component(const MemoryPlan& plan, const std::string& name, bool per_rank = false) {
  for (const auto& c : plan.components)
    if (c.name == name) return per_rank ? c.per_rank_bytes : c.total_bytes;
  ADD_FAILURE() << "no component " << name;
  return -1;
}

TEST(MemoryPlan, OneBillionParamsAdamWIs16GB) {
  const MemoryPlan p = memory_plan_compute(recipe(1000000000));
  EXPECT_EQ(component(p, "params"), 2000000000);
  EXPECT_EQ(component(p, "grads"), 2000000000);
  EXPECT_EQ(component(p, "master"), 4000000000);
  EXPECT_EQ(component(p, "optim.m"), 4000000000);
  EXPECT_EQ(component(p, "optim.v"), 4000000000);
  EXPECT_EQ(p.model_state_bytes, 16000000000);
  for (const auto& c : p.components) {
    if (!c.model_state) continue;
    EXPECT_EQ(c.bytes_per_param(), c.name == "params" || c.name == "grads" ? 2.0 : 4.0) << c.name;
  }
}

TEST(MemoryPlan, SevenBillionParamsOptimizerIs75Percent) {
  const MemoryPlan p = memory_plan_compute(recipe(7000000000));
  EXPECT_EQ(p.model_state_bytes, 112000000000);
  EXPECT_EQ(p.optimizer_bytes, 84000000000);  // master + m + v
  EXPECT_DOUBLE_EQ(static_cast<double>(p.optimizer_bytes) / p.model_state_bytes, 0.75);
}

TEST(MemoryPlan, OptimizerBytesPerParam) {
  OptimConfig o;
  o.name = "sgd";
  o.momentum = 0.0;
  EXPECT_EQ(plan_optimizer_bytes_per_param(o), 4.0);
  o.momentum = 0.9;
  EXPECT_EQ(plan_optimizer_bytes_per_param(o), 8.0);
  o.name = "adamw";
  EXPECT_EQ(plan_optimizer_bytes_per_param(o), 12.0);
  o.name = "lamb";
  EXPECT_EQ(plan_optimizer_bytes_per_param(o), 12.0);
  // The same figures from the plan's components (master + states) for N = 1e9.
  for (auto [name, momentum, k] :
       {std::tuple{"sgd", 0.0, 4}, {"sgd", 0.9, 8}, {"adamw", 0.9, 12}}) {
    PlanInput in = recipe(1000000000);
    in.optim.name = name;
    in.optim.momentum = momentum;
    EXPECT_EQ(memory_plan_compute(in).optimizer_bytes, int64_t{k} * 1000000000) << name;
  }
}

TEST(MemoryPlan, ShardedMomentsAreOneGBPerRankButPeakIsNotOneEighth) {
  PlanInput in = recipe(1000000000);
  in.world = 8;
  in.zero = 1;
  in.largest_unit = 1000000000 / 32;
  const MemoryPlan p = memory_plan_compute(in);
  EXPECT_EQ(component(p, "optim.m") + component(p, "optim.v"), 8000000000);
  EXPECT_EQ(p.per_rank_for_tag(MemTag::kOptimM) + p.per_rank_for_tag(MemTag::kOptimV), 1000000000);
  // Parameters, gradients and the reduce-scatter buffer stay apart from the sharded states.
  EXPECT_EQ(component(p, "params", true), 2000000000);
  EXPECT_EQ(component(p, "grads", true), 2000000000);
  EXPECT_GT(component(p, "comm", true), 0);
  EXPECT_EQ(p.model_state_per_rank, int64_t{2000000000} + 2000000000 + 12000000000 / 8);
  EXPECT_GT(p.per_rank_peak, p.model_state_bytes / 8);
}

TEST(MemoryPlan, AccumulationChangesGlobalBatchNotActivationsOrOptimizerState) {
  PlanInput in = recipe(124000000);
  in.shapes = {12, 12, 768, 50304, 1024};
  in.world = 4;
  in.micro_batch = 2;
  in.accum = 8;
  const MemoryPlan p = memory_plan_compute(in);
  EXPECT_EQ(p.global_batch, 64);
  EXPECT_EQ(component(p, "activations"), plan_activation_bytes(in.shapes, 2, Recompute::kNone));
  PlanInput one = in;
  one.accum = 1;
  one.world = 1;
  const MemoryPlan q = memory_plan_compute(one);
  EXPECT_EQ(component(q, "activations"), component(p, "activations"));
  EXPECT_EQ(q.optimizer_bytes, p.optimizer_bytes);
  // Hand count for one sequence of GPT-2 small, recompute none (fp32, T*C etc. all multiples of
  // 16 elements so no alignment padding): (L+1)TC + L(15TC + 4T + HT) + TC + 3T + T*Vp.
  const int64_t T = 1024, C = 768, L = 12, H = 12, Vp = 50304;
  const int64_t elements =
      (L + 1) * T * C + L * (15 * T * C + 4 * T + H * T) + T * C + 3 * T + T * Vp;
  EXPECT_EQ(plan_activation_bytes(in.shapes, 1, Recompute::kNone), 4 * elements);
  // block keeps the residual stream and one shared block; mlp drops the 8TC per layer but one.
  EXPECT_EQ(plan_activation_bytes(in.shapes, 1, Recompute::kNone) -
                plan_activation_bytes(in.shapes, 1, Recompute::kMlp),
            4 * (L - 1) * 8 * T * C);
  EXPECT_EQ(plan_activation_bytes(in.shapes, 1, Recompute::kNone) -
                plan_activation_bytes(in.shapes, 1, Recompute::kBlock),
            4 * (L - 1) * (15 * T * C + 4 * T + H * T));
}

// The planner reads the block's variants from [model] whole (PlanShapes::block): its activation
// bytes are the model's own activation list for that configuration, whatever the variant. The
// `memory --params` path planned GELU's two MLP activations for a SwiGLU block before.
TEST(MemoryPlan, ActivationsFollowEveryBlockVariantOfTheModelConfig) {
  ModelConfig m;
  m.n_layer = 3;
  m.n_head = 4;
  m.n_embd = 64;
  m.block_size = 32;
  m.vocab_size = 300;
  m.mlp = "swiglu";
  m.n_kv_head = 2;
  m.qk_norm = true;
  m.norm = "rmsnorm";
  m.position = "rope";
  PlanShapes s = {m.n_layer, m.n_head, m.n_embd, m.padded_vocab(), 32};
  s.block = m;
  for (Recompute r : {Recompute::kNone, Recompute::kMlp, Recompute::kBlock}) {
    const int64_t model_bytes =
        act_list_bytes(saved_activations(activation_spec(m, 2, 32, r, 0, DType::kF32)));
    EXPECT_EQ(plan_activation_bytes(s, 2, r), model_bytes) << recompute_name(r);
  }
  PlanShapes gelu = s;
  gelu.block.mlp = "gelu";
  EXPECT_GT(plan_activation_bytes(s, 2, Recompute::kNone),
            plan_activation_bytes(gelu, 2, Recompute::kNone));
}

TEST(MemoryPlan, ZeroStages) {
  const int64_t N = 1000000000, D = 8, K = 12;
  const int64_t expected[4] = {(2 + 2 + K) * N, (2 + 2) * N + K * N / D, 2 * N + (2 + K) * N / D,
                               (2 + 2 + K) * N / D};
  for (int64_t stage = 0; stage <= 3; ++stage) {
    PlanInput in = recipe(N);
    in.world = D;
    in.zero = stage;
    const MemoryPlan p = memory_plan_compute(in);
    EXPECT_EQ(p.model_state_per_rank, expected[stage]) << "stage " << stage;
    EXPECT_EQ(p.model_state_bytes, (2 + 2 + K) * N) << "stage " << stage;
  }
}

TEST(MemoryPlan, CheckpointSizes) {
  const int64_t N = 1000000000;
  const MemoryPlan p = memory_plan_compute(recipe(N));
  EXPECT_EQ(p.ckpt_weights_bytes, 2 * N);
  EXPECT_GE(p.ckpt_full_bytes, 14 * N);
  EXPECT_LE(p.ckpt_full_bytes, 16 * N);
}

TEST(MemoryPlan, ConfigTableCountsPaddingHonestly) {
  RunConfig cfg;
  cfg.model.vocab_size = 65;
  const PlanInput in = plan_input_from_config(cfg, 1, 2, -1);
  EXPECT_GT(in.elements, in.num_params);  // 256-element alignment of every tensor
  const MemoryPlan p = memory_plan_compute(in);
  EXPECT_EQ(component(p, "params"), in.elements * 4);
  EXPECT_GT(component(p, "params"), in.num_params * 4);
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// precision.attention = cudnn at GPT-2 124M's shape, B = 2: the CUDA backend's bf16 slots for
// qkv, out, dout and dqkv (8 x B*T*C elements, 2 bytes each) and the deterministic backward's
// dP buffer (B*H*T64^2 bf16) with its fp32 row sums (B*H*T), counted by hand; absent otherwise.
TEST(MemoryPlan, CudnnAttentionBuffersCountedOnlyWhenChosen) {
  PlanInput in = recipe(124000000);
  in.shapes = {12, 12, 768, 50304, 1024};
  in.micro_batch = 2;
  const MemoryPlan own = memory_plan_compute(in);
  for (const auto& c : own.components) EXPECT_NE(c.name, "workspace.cudnn_attention");
  in.cudnn_attention = true;
  const MemoryPlan dnn = memory_plan_compute(in);
  const int64_t btc = 2 * 1024 * 768;
  const int64_t expected = 8 * btc * 2 + 2 * 12 * 1024 * 1024 * 2 + 2 * 12 * 1024 * 4;
  EXPECT_EQ(expected, 75595776);
  EXPECT_EQ(component(dnn, "workspace.cudnn_attention"), expected);
  EXPECT_EQ(dnn.per_rank_peak - own.per_rank_peak, expected);
}

}  // namespace
}  // namespace ledgerlm
