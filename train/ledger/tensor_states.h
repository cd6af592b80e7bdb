// The optimizer state one tensor part has, predicted from the configuration alone: which state
// tensors, their dtypes and element counts. The per-tensor half of the memory plan: `ledgerlm
// memory --tensors` prints it, and a run checks its optimizer's actual state against it tensor by
// tensor (so a wrong rule — Muon's momentum missing on a matrix, 8-bit state stored as fp32, a
// small-tensor rule applied to a shard instead of the tensor — stops the run before step 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/base/dtype.h"
#include "optim/optimizer.h"
#include "train/ledger/memory_plan.h"

namespace ledgerlm {

struct TensorState {
  std::string name;  // as in checkpoints: "m", "v", "momentum", "codes.m", "row", ...
  DType dtype = DType::kF32;
  int64_t elements = 0;
  int64_t bytes() const { return elements * static_cast<int64_t>(dtype_size(dtype)); }
};

// The states of `count` elements of tensor `t` held on a rank (whole-tensor statistics such as
// Adafactor's row and column sums are whole on every rank holding a part), for optimizer `o`
// (o.state_dtype: the parameter-shaped states' storage).
std::vector<TensorState> plan_tensor_states(const OptimConfig& o, const PlanTensor& t,
                                            int64_t count);

// "m:fp32x66048 v:fp32x66048 (528.4 kB)": one tensor's states as text.
std::string tensor_states_text(const std::vector<TensorState>& states);

// The optimizer's state views per table row (param-less scalars left out), as TensorStates.
std::vector<std::vector<TensorState>> tensor_states_of_views(const std::vector<StateView>& views,
                                                             size_t params);

}  // namespace ledgerlm
