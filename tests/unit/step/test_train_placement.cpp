// The placement table (train/step/placement.h): for every world size, ZeRO stage and precision, the
// ranks' parts of every tensor cover it exactly once, every span lies inside its buffer, the
// optimizer's parts are disjoint, the owner holds the tensor's first element, and a ModelState
// built from it allocates the buffers the table sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "optim/optim_groups.h"
#include "tests/support/config_test_support.h"
#include "train/step/model_state.h"
#include "train/step/placement.h"

namespace ledgerlm {
namespace {

RunConfig small_config(const std::string& params, const std::string& master) {
  RunConfig c = testing::shape_config({.vocab = 100, .L = 2, .H = 2, .C = 64, .block = 16});
  c.precision.params = params;
  c.precision.master = master;
  return c;
}

struct Case {
  std::string params, master;
};

// Every element of [0, numel) exactly once among `spans`, each inside [0, numel).
void expect_exact_cover(const std::vector<Span>& spans, int64_t numel, const std::string& what) {
  std::vector<Span> held;
  for (const Span& s : spans)
    if (s.count > 0) held.push_back(s);
  std::sort(held.begin(), held.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  int64_t next = 0;
  for (const Span& s : held) {
    EXPECT_EQ(s.begin, next) << what << ": gap or overlap at element " << next;
    next = s.begin + s.count;
  }
  EXPECT_EQ(next, numel) << what << ": parts end at " << next << " of " << numel;
}

TEST(Placement, PartsCoverEveryTensorOnceAndStayInsideTheirBuffers) {
  const std::vector<Case> cases = {{"fp32", "fp32"}, {"bf16", "fp32"}, {"bf16", "none"}};
  for (const Case& k : cases) {
    const RunConfig config = small_config(k.params, k.master);
    const PrecisionPlan plan = precision_plan(config);
    for (int world : {1, 2, 4}) {
      const ParamTable table = param_table_for_run(config, world);
      for (int stage = 0; stage <= 3; ++stage) {
        const std::string where = k.params + "/" + k.master + " world " + std::to_string(world) +
                                  " stage " + std::to_string(stage);
        std::vector<PlacementTable> ranks;
        for (int r = 0; r < world; ++r)
          ranks.push_back(placement_build(table, shard_layout_build(table, world, r), stage, plan,
                                          config.optim));
        for (size_t i = 0; i < table.params.size(); ++i) {
          const ParamInfo& p = table.params[i];
          std::vector<Span> state_parts;
          int writers = 0;
          for (const PlacementTable& t : ranks) {
            const TensorPlacement& tp = t.tensors[i];
            ASSERT_EQ(tp.param, static_cast<int>(i));
            EXPECT_EQ(tp.group, optim_group_of(p, config.optim));
            // Master, state and reduced gradients hold the same part of the tensor.
            EXPECT_EQ(tp.master.begin, tp.state.begin) << where << " " << p.name;
            EXPECT_EQ(tp.master.count, tp.state.count) << where << " " << p.name;
            EXPECT_EQ(tp.grads.count, tp.state.count) << where << " " << p.name;
            if (stage >= 1 || t.rank == 0) state_parts.push_back(tp.state);
            if (t.writes_checkpoint && tp.master.count > 0) ++writers;
            // Inside the buffers.
            auto inside = [&](const Span& s, int64_t length, const char* buf) {
              if (s.count == 0) return;
              EXPECT_GE(s.at, 0) << where << " " << p.name << " " << buf;
              EXPECT_LE(s.at + s.count, length) << where << " " << p.name << " " << buf;
            };
            inside(tp.compute, t.compute_length, "compute");
            inside(tp.grads, t.grads_length, "grads");
            inside(tp.state, t.state_length, "state");
            if (t.master_is_compute) {
              EXPECT_EQ(t.master_length, 0);
              if (tp.master.count > 0) {
                EXPECT_EQ(tp.master.at, tp.compute.at_of(tp.master.begin))
                    << where << " " << p.name;
              }
            } else {
              inside(tp.master, t.master_length, "master");
            }
            // The compute copy is whole below stage 3.
            if (stage < 3) {
              EXPECT_EQ(tp.compute.begin, 0);
              EXPECT_EQ(tp.compute.count, p.numel);
              EXPECT_EQ(tp.compute.at, p.offset);
            }
            // The owner is a rank holding a part, and the one holding element 0.
            EXPECT_LE(tp.first_rank, tp.owner);
            EXPECT_LE(tp.owner, tp.last_rank);
            if (stage >= 1 && tp.state.count > 0 && tp.state.begin == 0) {
              EXPECT_EQ(tp.owner, t.rank) << where << " " << p.name;
            }
            if (stage >= 1 && tp.state.count > 0) {
              EXPECT_GE(t.rank, tp.first_rank) << where << " " << p.name;
              EXPECT_LE(t.rank, tp.last_rank) << where << " " << p.name;
            }
          }
          expect_exact_cover(state_parts, p.numel, where + " " + p.name);
          // Every part is written to checkpoints exactly once (stage 0: by rank 0).
          if (stage == 0) {
            EXPECT_EQ(writers, 1) << where << " " << p.name;
          }
        }
        // The optimizer's parts: disjoint in the compact state and inside it.
        for (const PlacementTable& t : ranks) {
          OptimShard shard = t.optimizer_shard();
          EXPECT_EQ(shard.length, t.state_length);
          std::sort(shard.parts.begin(), shard.parts.end(),
                    [](const OptimPart& a, const OptimPart& b) { return a.local < b.local; });
          int64_t end = 0;
          for (const OptimPart& part : shard.parts) {
            EXPECT_GE(part.local, end) << where;
            end = part.local + part.count;
          }
          EXPECT_LE(end, shard.length) << where;
          // Units: their parts tile the rank's compact shard in order from stage 1.
          int64_t local = 0;
          for (const UnitPlacement& up : t.units) {
            if (stage >= 1) {
              EXPECT_EQ(up.state.at, local) << where << " unit " << up.unit;
              local += up.state.count;
            } else {
              EXPECT_EQ(up.state.at, table.units[static_cast<size_t>(up.unit)].offset);
            }
          }
        }
      }
    }
  }
}

TEST(Placement, ModelStateAllocatesWhatTheTableSizes) {
  for (const Case& k : std::vector<Case>{{"fp32", "fp32"}, {"bf16", "fp32"}, {"bf16", "none"}}) {
    RunConfig config = small_config(k.params, k.master);
    config.optim.name = "adafactor";  // host-memory statistics next to backend state
    auto backend = backend_create_cpu(2);
    ModelState state(config, *backend);
    const PlacementTable& t = state.placement();
    EXPECT_EQ(backend->tracker().usage(MemTag::kParams).current,
              t.compute_length * static_cast<int64_t>(dtype_size(state.plan().params)));
    EXPECT_EQ(backend->tracker().usage(MemTag::kGrads).current,
              t.grads_length * static_cast<int64_t>(dtype_size(state.plan().grads)));
    const int64_t master_bytes = t.master_length * 4;
    EXPECT_EQ(backend->tracker().usage(MemTag::kMaster).current,
              k.master == "none" ? 0 : master_bytes);
    // Each trained tensor knows where each of the optimizer's state components lives.
    const size_t components = state.optimizer().state_components().size();
    for (const TensorPlacement& tp : t.tensors) {
      ASSERT_EQ(tp.state_where.size(), components);
      for (size_t c = 0; c < components; ++c)
        EXPECT_EQ(tp.state_where[c], state.optimizer().state_components()[c].host
                                         ? Location::kHost
                                         : Location::kDevice);
    }
    const std::string text =
        placement_describe(t, state.table(), {"matrix", "embedding", "nodecay"}, {});
    EXPECT_NE(text.find("block.1.mlp.fc.weight"), std::string::npos) << text;
  }
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// Muon's whole-matrix work: from stage 1 each matrix tensor's owner comes from the balance of
// Newton–Schulz FLOPs (every rank of 4 owns some), the holders tile each tensor exactly and the
// optimizer shard lists every trained tensor's spread; at stage 0 each rank owns what it holds.
TEST(Placement, MuonOwnersAreBalancedAndHoldersTileEachTensor) {
  RunConfig c = small_config("fp32", "fp32");
  c.optim.name = "muon";
  for (int stage : {0, 1, 3}) {
    const int world = 4;
    const ParamTable table = param_table_for_run(c, world);
    std::vector<int> owned(world, 0);
    for (int rank = 0; rank < world; ++rank) {
      const PlacementTable t = placement_build(table, shard_layout_build(table, world, rank), stage,
                                               precision_plan(c), c.optim);
      const OptimShard shard = t.optimizer_shard();
      EXPECT_EQ(shard.tensors.size(), table.params.size());
      for (const TensorPlacement& tp : t.tensors) {
        const ParamInfo& p = table.params[static_cast<size_t>(tp.param)];
        int64_t next = 0;
        for (const OptimHolder& h : tp.holders) {
          EXPECT_EQ(h.begin, next) << p.name;
          next = h.begin + h.count;
        }
        EXPECT_EQ(next, p.numel) << p.name << ": the holders tile the tensor";
        if (p.kind != ParamKind::kMatrix) continue;
        if (stage == 0)
          EXPECT_EQ(tp.owner, rank) << p.name;
        else if (rank == 0)
          ++owned[static_cast<size_t>(tp.owner)];
      }
    }
    if (stage > 0) {
      for (int r = 0; r < world; ++r) EXPECT_GT(owned[static_cast<size_t>(r)], 0) << "rank " << r;
    }
  }
}

}  // namespace
}  // namespace ledgerlm
