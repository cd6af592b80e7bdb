// Per-tensor optimizer state (see tensor_states.h): the optimizer's traits (optim/optim_traits.h)
// applied to one tensor part, the same components the planner sums (memory_plan.cpp).
#include "train/ledger/tensor_states.h"

#include <cstdio>

#include "model/base/check.h"
#include "optim/optim_traits.h"

namespace ledgerlm {

std::vector<TensorState> plan_tensor_states(const OptimConfig& o, const PlanTensor& t,
                                            int64_t count) {
  const OptimTraits* traits = optim_traits_find(o.name);
  if (traits == nullptr)
    fail(std::string("optim.name = '") + o.name + "': no per-tensor state rule");
  std::vector<TensorState> out;
  for (const StateComponentTraits& c : traits->states) {
    if (!optim_state_present(c, o) || !optim_state_covers(c, t.primary)) continue;
    int64_t n = count;  // kPerElement: the elements held (whole blocks are the buffer's affair)
    if (c.extent == StateExtent::kPerBlock) n = (count + o.block_size - 1) / o.block_size;
    if (c.extent == StateExtent::kRows) n = t.rows;
    if (c.extent == StateExtent::kCols) n = t.cols;
    out.push_back({c.name, optim_state_dtype(c, o), n});
  }
  if (o.ema_half_life > 0.0) out.push_back({"ema", DType::kF32, count});  // weight_average.cpp
  return out;
}

std::string tensor_states_text(const std::vector<TensorState>& states) {
  std::string out;
  int64_t bytes = 0;
  char part[96];
  for (const TensorState& s : states) {
    std::snprintf(part, sizeof part, "%s%s:%sx%lld", out.empty() ? "" : " ", s.name.c_str(),
                  dtype_name(s.dtype), static_cast<long long>(s.elements));
    out += part;
    bytes += s.bytes();
  }
  if (states.empty()) return "-";
  std::snprintf(part, sizeof part, " (%.1f kB)", static_cast<double>(bytes) / 1e3);
  return out + part;
}

std::vector<std::vector<TensorState>> tensor_states_of_views(const std::vector<StateView>& views,
                                                             size_t params) {
  std::vector<std::vector<TensorState>> out(params);
  for (const StateView& v : views)
    if (v.param >= 0 && static_cast<size_t>(v.param) < params)
      out[static_cast<size_t>(v.param)].push_back({v.name, v.dtype, v.numel});
  return out;
}

}  // namespace ledgerlm
