// Entry checks of the CUDA element-wise ops on activation tensors (fp32 or fp64), shared by their
// files so that every op words its refusal the same way.
#pragma once

#include "model/backend/backend.h"
#include "model/backend/common/storage.h"
#include "model/base/check.h"

namespace ledgerlm::cuda {

// The dtype of `t`, which must be a non-null activation tensor; `what` names it in the error.
inline DType act_of(const Tensor& t, const char* what) {
  LLM_REQUIRE(t.data != nullptr && dtype_is_act(t.dtype), "cuda backend: ", what,
              " must be a non-null fp32 or fp64 tensor");
  return t.dtype;
}

// `t` must be non-null with the activation dtype `act`.
inline void same_act(const Tensor& t, DType act, const char* what) {
  LLM_REQUIRE(t.data != nullptr && t.dtype == act, "cuda backend: ", what,
              " must have the activation dtype ", dtype_name(act));
}

}  // namespace ledgerlm::cuda
