// The new optimizers in the memory plan and the run-time checks against it:
//   - bytes per parameter: Lion 4, Schedule-Free 8 (+ a 4-byte master even with fp32 params),
//     AdEMAMix 12, Muon 4 per matrix parameter and 8 per AdamW-group parameter, with the groups
//     labelled in the plan's rows;
//   - under ZeRO the ranks' Muon state sums to world 1's exactly (compact per-group buffers: no
//     padding), and the owners' Newton–Schulz work is spread over the ranks;
//   - ledger_check_optimizer and ledger_check_tensor_states refuse a mismatch (a test that
//     cannot fail would prove nothing: both are fed a wrong allocation here).
#include <gtest/gtest.h>

#include <map>

#include "optim/muon_plan.h"
#include "tests/support/config_test_support.h"
#include "tests/support/plan_test_support.h"
#include "tests/support/test_util.h"
#include "train/ledger/ledger.h"
#include "train/ledger/memory_plan.h"
#include "train/ledger/tensor_states.h"

namespace ledgerlm {
namespace {

using testing::plan_component;

RunConfig small_config(const std::string& optim) {
  RunConfig c =
      testing::shape_config({.vocab = 512, .L = 2, .H = 2, .C = 64, .block = 32, .T = 32, .B = 2});
  c.optim.name = optim;
  c.optim.schedule = "constant";
  return c;
}

TEST(LedgerOptimizerGroups, BytesPerParameterAndGroups) {
  const ParamTable table = param_table_for_run(small_config("adamw"), 1);
  int64_t matrices = 0;
  for (const ParamInfo& p : table.params)
    if (muon_orthogonalises(p, small_config("muon").optim)) matrices += p.numel;
  const int64_t E = table.total, N = table.num_params;
  struct Want {
    const char* optim;
    std::map<std::string, int64_t> bytes;
  };
  const Want wants[] = {
      {"lion", {{"optim.m", 4 * E}}},
      {"adamw_schedulefree", {{"optim.z", 4 * E}, {"optim.v", 4 * E}, {"master", 4 * E}}},
      {"ademamix", {{"optim.m1", 4 * E}, {"optim.nu", 4 * E}, {"optim.m2", 4 * E}}},
      {"muon",
       {{"optim.momentum", 4 * matrices},
        {"optim.m", 4 * (N - matrices)},
        {"optim.v", 4 * (N - matrices)}}},
  };
  for (const Want& w : wants) {
    const MemoryPlan p =
        memory_plan_compute(plan_input_from_config(small_config(w.optim), 1, 1, -1));
    for (const auto& [name, bytes] : w.bytes) {
      const PlanComponent* c = plan_component(p, name);
      ASSERT_NE(c, nullptr) << w.optim << " " << name;
      EXPECT_EQ(c->total_bytes, bytes) << w.optim << " " << name;
    }
  }
  const MemoryPlan muon =
      memory_plan_compute(plan_input_from_config(small_config("muon"), 1, 1, -1));
  EXPECT_EQ(plan_component(muon, "optim.momentum")->group, "matrix");
  EXPECT_EQ(plan_component(muon, "optim.m")->group, "embedding,nodecay");
  // No master with fp32 params for the others (the params are their own master).
  EXPECT_EQ(
      plan_component(memory_plan_compute(plan_input_from_config(small_config("lion"), 1, 1, -1)),
                     "master"),
      nullptr);
}

TEST(LedgerOptimizerGroups, MuonStateSumsOverRanksToWorldOnesAndOwnersShareTheWork) {
  const RunConfig c = small_config("muon");
  const MemoryPlan one = memory_plan_compute(plan_input_from_config(c, 1, 1, -1));
  for (int world : {2, 4})
    for (int stage : {1, 2, 3}) {
      RunConfig cw = c;
      cw.dist.zero = stage;
      int64_t momentum = 0, m = 0;
      for (int r = 0; r < world; ++r) {
        const MemoryPlan p = memory_plan_compute(plan_input_from_config(cw, world, 1, -1, r));
        momentum += plan_component(p, "optim.momentum")->per_rank_bytes;
        m += plan_component(p, "optim.m")->per_rank_bytes;
      }
      EXPECT_EQ(momentum, plan_component(one, "optim.momentum")->total_bytes)
          << world << " " << stage;
      EXPECT_EQ(m, plan_component(one, "optim.m")->total_bytes) << world << " " << stage;
    }
  // 8 matrix tensors (4 per block), qkv three matrices each: every rank of 4 owns some.
  const ParamTable table = param_table_for_run(c, 4);
  std::map<int, int> owned;
  for (int o : muon_owners(table, c.optim, 4))
    if (o >= 0) ++owned[o];
  EXPECT_EQ(owned.size(), 4u);
}

TEST(LedgerOptimizerGroups, ChecksRefuseAWrongAllocation) {
  const RunConfig c = small_config("muon");
  const MemoryPlan plan = memory_plan_compute(plan_input_from_config(c, 1, 1, -1));
  std::vector<StateComponent> ok;
  for (const PlanComponent& pc : plan.components) {
    if (!pc.optimizer || pc.tag == MemTag::kMaster) continue;
    StateComponent sc;
    sc.name = pc.name.substr(6);  // "optim.<name>"
    sc.bytes = pc.per_rank_bytes;
    sc.tag = pc.tag;
    ok.push_back(sc);
  }
  for (const char* scratch : {"comm.muon", "workspace.muon"}) {
    StateComponent sc;
    sc.name = scratch;
    sc.bytes = plan_component(plan, scratch)->per_rank_bytes;
    sc.tag = std::string(scratch) == "comm.muon" ? MemTag::kComm : MemTag::kWorkspace;
    sc.scratch = true;
    ok.push_back(sc);
  }
  EXPECT_EQ(testing::error_of([&] { ledger_check_optimizer(plan, ok, 0); }), "");
  // Muon silently running as plain momentum on everything: no m and v, momentum everywhere.
  std::vector<StateComponent> wrong = ok;
  for (StateComponent& sc : wrong)
    if (sc.name == "m" || sc.name == "v") sc.bytes = 0;
  const std::string e = testing::error_of([&] { ledger_check_optimizer(plan, wrong, 0); });
  EXPECT_NE(
      e.find("optimizer component 'optim.m' (group embedding,nodecay) on rank 0: allocated 0"),
      std::string::npos)
      << e;

  // Per tensor: a matrix with AdamW's m and v instead of Muon's momentum.
  const ParamTable table = param_table_for_run(c, 1);
  const PlacementTable placement =
      placement_build(table, shard_layout_build(table, 1, 0), 0, precision_plan(c), c.optim);
  std::vector<float> storage(static_cast<size_t>(table.total));
  std::vector<StateView> views;
  for (const TensorPlacement& tp : placement.tensors) {
    const ParamInfo& p = table.params[static_cast<size_t>(tp.param)];
    const bool muon = muon_orthogonalises(p, c.optim);
    for (const char* name :
         muon ? std::vector<const char*>{"momentum"} : std::vector<const char*>{"m", "v"}) {
      StateView v;
      v.name = name;
      v.param = tp.param;
      v.numel = p.numel;
      v.data = storage.data();
      views.push_back(v);
    }
  }
  const PlanInput in = plan_input_from_config(c, 1, 1, -1);
  EXPECT_EQ(testing::error_of([&] { ledger_check_tensor_states(in, placement, views, table); }),
            "");
  for (StateView& v : views)
    if (v.name == "momentum") v.name = "m";
  const std::string t =
      testing::error_of([&] { ledger_check_tensor_states(in, placement, views, table); });
  EXPECT_NE(t.find("has optimizer state m:fp32x"), std::string::npos) << t;
  EXPECT_NE(t.find("the per-tensor table says momentum:fp32x"), std::string::npos) << t;
}

}  // namespace
}  // namespace ledgerlm
