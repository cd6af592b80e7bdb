// The predicted ledger for any block count (see plan_layers.h).
#include "train/ledger/plan_layers.h"

#include <string>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

// Blocks of the anchor plans: past the few block indices a train.freeze glob usually names
// ("block.[0-5].*"), so the blocks added between the anchors are ordinary ones.
constexpr int64_t kAnchorLayers = 64;

MemoryPlan exact_plan(const RunConfig& config, int64_t layers, int64_t world, int64_t threads,
                      int64_t data_bytes, int64_t rank) {
  RunConfig c = config;
  c.model.n_layer = layers;
  return memory_plan_compute(plan_input_from_config(c, world, threads, data_bytes, rank));
}

// base + q x (hi - lo), refusing what int64 cannot hold (run_config_check_sizes keeps real
// configurations far below that).
int64_t extrapolate(int64_t base, int64_t lo, int64_t hi, int64_t q, int64_t n_layer) {
  int64_t step = 0, out = 0;
  const bool overflow =
      __builtin_mul_overflow(hi - lo, q, &step) || __builtin_add_overflow(base, step, &out);
  LLM_REQUIRE(!overflow, "model.n_layer = ", n_layer,
              ": the predicted byte counts exceed 64 bits; make the model smaller");
  return out;
}

}  // namespace

MemoryPlan memory_plan_for_config(const RunConfig& config, int64_t world, int64_t threads,
                                  int64_t data_bytes, int64_t rank) {
  const int64_t L = config.model.n_layer;
  if (L <= kExactPlanLayers)
    return memory_plan_compute(plan_input_from_config(config, world, threads, data_bytes, rank));
  const int64_t a = kAnchorLayers, q = (L - a) / world, r = (L - a) % world;
  const MemoryPlan lo = exact_plan(config, a, world, threads, data_bytes, rank);
  const MemoryPlan hi = exact_plan(config, a + world, world, threads, data_bytes, rank);
  MemoryPlan out = exact_plan(config, a + r, world, threads, data_bytes, rank);
  const MemoryPlan& base = out;
  auto ex = [&](int64_t b, int64_t l, int64_t h) { return extrapolate(b, l, h, q, L); };
  LLM_REQUIRE(lo.components.size() == hi.components.size() &&
                  lo.components.size() == base.components.size(),
              "model.n_layer = ", L, ": the per-block plans disagree in their components");
  for (size_t i = 0; i < out.components.size(); ++i) {
    PlanComponent& c = out.components[i];
    const PlanComponent &cl = lo.components[i], &ch = hi.components[i];
    c.total_bytes = ex(c.total_bytes, cl.total_bytes, ch.total_bytes);
    c.per_rank_bytes = ex(c.per_rank_bytes, cl.per_rank_bytes, ch.per_rank_bytes);
    c.num_params = ex(c.num_params, cl.num_params, ch.num_params);
  }
  out.model_state_bytes = ex(base.model_state_bytes, lo.model_state_bytes, hi.model_state_bytes);
  out.optimizer_bytes = ex(base.optimizer_bytes, lo.optimizer_bytes, hi.optimizer_bytes);
  out.model_state_per_rank =
      ex(base.model_state_per_rank, lo.model_state_per_rank, hi.model_state_per_rank);
  out.per_rank_peak = ex(base.per_rank_peak, lo.per_rank_peak, hi.per_rank_peak);
  out.ckpt_weights_bytes =
      ex(base.ckpt_weights_bytes, lo.ckpt_weights_bytes, hi.ckpt_weights_bytes);
  PlanInput& x = out.input;
  const PlanInput &xl = lo.input, &xh = hi.input;
  x.num_params = ex(x.num_params, xl.num_params, xh.num_params);
  x.frozen_params = ex(x.frozen_params, xl.frozen_params, xh.frozen_params);
  x.frozen_elements = ex(x.frozen_elements, xl.frozen_elements, xh.frozen_elements);
  x.elements = ex(x.elements, xl.elements, xh.elements);
  x.shapes.n_layer = L;
  x.shapes.untrained_blocks =
      ex(x.shapes.untrained_blocks, xl.shapes.untrained_blocks, xh.shapes.untrained_blocks);
  // Figures only: the anchors' tensors and units would describe another model.
  x.tensors.clear();
  x.units.clear();
  // The backend's scratch rounds to pages (not affine): computed again from the extrapolated
  // element count (without units the shard is E / world, exact: units are padded to a multiple
  // of world).
  for (PlanComponent& c : out.components) {
    if (c.name != "workspace.backend") continue;
    const int64_t exact = plan_cpu_workspace_bytes(x);
    out.per_rank_peak += exact - c.per_rank_bytes;
    c.total_bytes = c.per_rank_bytes = exact;
  }
  out.ckpt_full_bytes = plan_ckpt_full_bytes(out);  // a ratio of the figures, not affine
  out.notes.push_back(
      "model.n_layer = " + std::to_string(L) + " > " + std::to_string(kExactPlanLayers) +
      ": computed per block x count from exact plans of " + std::to_string(a) + " and " +
      std::to_string(a + world) + " blocks (no table of every block is built)");
  return out;
}

}  // namespace ledgerlm
