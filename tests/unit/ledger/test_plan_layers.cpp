// The plan of a huge block count, computed per block x count (train/ledger/plan_layers.h), against
// the exact plan over the whole parameter table at a count just past kExactPlanLayers, where both
// can be computed: every figure of the ledger must agree, for the configurations whose layouts
// differ most (one rank; ZeRO-1 over 3 ranks with Muon, whose owners go round the ranks; ZeRO-3
// in bf16; LoRA adapters; the bottom blocks frozen), on every rank.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/config_test_support.h"
#include "train/ledger/memory_plan.h"
#include "train/ledger/plan_layers.h"

namespace ledgerlm {
namespace {

RunConfig small_model() {
  return testing::shape_config(
      {.vocab = 300, .L = 4, .H = 2, .C = 64, .block = 32, .T = 32, .B = 2});
}

// Every figure the ledger prints or compares. Exact equality: the figures are sums over
// identical blocks, so per block x count must give the table's own numbers byte for byte.
void expect_same(const MemoryPlan& got, const MemoryPlan& want, const std::string& what) {
  ASSERT_EQ(got.components.size(), want.components.size()) << what;
  for (size_t i = 0; i < got.components.size(); ++i) {
    const PlanComponent &g = got.components[i], &w = want.components[i];
    EXPECT_EQ(g.name, w.name) << what;
    EXPECT_EQ(g.total_bytes, w.total_bytes) << what << " " << w.name;
    EXPECT_EQ(g.per_rank_bytes, w.per_rank_bytes) << what << " " << w.name;
  }
  EXPECT_EQ(got.per_rank_peak, want.per_rank_peak) << what;
  EXPECT_EQ(got.model_state_bytes, want.model_state_bytes) << what;
  EXPECT_EQ(got.model_state_per_rank, want.model_state_per_rank) << what;
  EXPECT_EQ(got.optimizer_bytes, want.optimizer_bytes) << what;
  EXPECT_EQ(got.ckpt_weights_bytes, want.ckpt_weights_bytes) << what;
  EXPECT_EQ(got.ckpt_full_bytes, want.ckpt_full_bytes) << what;
  EXPECT_EQ(got.input.num_params, want.input.num_params) << what;
  EXPECT_EQ(got.input.frozen_params, want.input.frozen_params) << what;
  EXPECT_EQ(got.input.elements, want.input.elements) << what;
}

void check(const RunConfig& base, int64_t world, const std::string& what) {
  // Two counts past the threshold with different remainders modulo the world size.
  for (int64_t layers : {kExactPlanLayers + 1, kExactPlanLayers + 7}) {
    RunConfig c = base;
    c.model.n_layer = layers;
    for (int64_t rank = 0; rank < world; ++rank) {
      const MemoryPlan exact = memory_plan_compute(plan_input_from_config(c, world, 2, -1, rank));
      const MemoryPlan by_count = memory_plan_for_config(c, world, 2, -1, rank);
      expect_same(by_count, exact,
                  what + " L" + std::to_string(layers) + " rank " + std::to_string(rank));
      EXPECT_TRUE(by_count.input.tensors.empty());  // no table of every block was built
    }
  }
}

TEST(PlanLayers, PerBlockTimesCountEqualsTheWholeTable) {
  check(small_model(), 1, "adamw");

  RunConfig muon = small_model();
  muon.optim.name = "muon";
  muon.dist.zero = 1;
  check(muon, 3, "muon zero1 world3");

  RunConfig z3 = small_model();
  z3.precision.params = "bf16";
  z3.precision.grads = "bf16";
  z3.dist.zero = 3;
  check(z3, 2, "bf16 zero3 world2");

  RunConfig lora = small_model();
  lora.model.lora.rank = 4;
  lora.model.lora.targets = "qkv,mlp_fc";
  check(lora, 1, "lora");

  RunConfig frozen = small_model();
  frozen.train.freeze = "embed.*,block.[0-5].*";
  check(frozen, 1, "freeze");
}

TEST(PlanLayers, UpToTheThresholdThePlanIsTheTablesOwn) {
  RunConfig c = small_model();
  c.model.n_layer = 3;
  const MemoryPlan p = memory_plan_for_config(c, 1, 2, -1);
  EXPECT_FALSE(p.input.tensors.empty());
  expect_same(p, memory_plan_compute(plan_input_from_config(c, 1, 2, -1)), "L3");
}

}  // namespace
}  // namespace ledgerlm
