// The predicted ledger of a run configuration, for any model.n_layer.
//
// Up to kExactPlanLayers blocks the plan is memory_plan_compute over the exact parameter table
// (plan_input_from_config). Past it, building the table would itself cost what the model is
// being checked for (a few KB per block: 1e6 blocks take ~4 GB and ~20 s), so the plan is
// computed per block type x count instead: every block past the first few is the same unit
// (same tensors, same padding, same activations), so each figure is affine in the block count
// over a period of `world` blocks (the ZeRO-1 Muon owners go round the ranks). Three exact plans
// of a few dozen blocks (a, a + world and a + r, r = (n_layer - a) mod world) give the figure at
// n_layer = a + q x world + r as plan(a + r) + q x (plan(a + world) - plan(a)). Bounded time and
// memory whatever n_layer is; a note on the plan says it was extrapolated.
#pragma once

#include <cstdint>

#include "model/param_table.h"
#include "train/config/run_config.h"
#include "train/ledger/memory_plan.h"

namespace ledgerlm {

constexpr int64_t kExactPlanLayers = kWholeTableMaxBlocks;

// The plan of `config` for rank `rank` of `world` (arguments as plan_input_from_config). Past
// kExactPlanLayers blocks the returned plan's input has no tensors or units (figures only).
MemoryPlan memory_plan_for_config(const RunConfig& config, int64_t world, int64_t threads,
                                  int64_t data_bytes, int64_t rank = 0);

}  // namespace ledgerlm
