// Element access for the CPU kernels: the checks done at op entry and the typed row helpers,
// over the storage types and dtype dispatch that the CPU and CUDA backends share
// (model/backend/common/storage.h: Bf16 / Half, load_value / store_value, dispatch_float).
#pragma once

#include <cstdint>

#include "model/backend/backend.h"
#include "model/backend/common/storage.h"
#include "model/base/check.h"
#include "model/base/dtype.h"

namespace ledgerlm::cpu {

// Checks done at op entry, before any parallel region (an exception must never leave one).
inline void require_float(const Tensor& t, const char* what) {
  LLM_REQUIRE(t.data != nullptr, "cpu backend: ", what, " is null");
  LLM_REQUIRE(dtype_is_float(t.dtype), "cpu backend: ", what, " must be fp32/fp64/bf16/fp16, got ",
              dtype_name(t.dtype));
}
// `what` and `what2` together name the tensor ("softmax_cross_entropy" " losses"): the message is
// built only on failure, so a check made every step allocates nothing.
inline void require_act(const Tensor& t, DType act, const char* what, const char* what2 = "") {
  LLM_REQUIRE(t.data != nullptr, "cpu backend: ", what, what2, " is null");
  LLM_REQUIRE(t.dtype == act, "cpu backend: ", what, what2, " must have the activation dtype ",
              dtype_name(act), ", got ", dtype_name(t.dtype));
}
inline DType require_act_dtype(const Tensor& t, const char* what) {
  LLM_REQUIRE(t.data != nullptr, "cpu backend: ", what, " is null");
  LLM_REQUIRE(dtype_is_act(t.dtype), "cpu backend: ", what, " must be fp32 or fp64, got ",
              dtype_name(t.dtype));
  return t.dtype;
}

// ---- row helpers: one dtype switch per row, typed inner loops ------------------------------
// They are called inside parallel loops on tensors whose dtype the op already validated.

// dst[i] = src[off + i]
template <class T, class S>
inline void row_load_typed(const S* src, int64_t n, T* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(load_value(src[i]));
}
template <class T>
inline void row_load(Tensor src, int64_t off, int64_t n, T* dst) {
  dispatch_float(src.dtype, [&](auto tag) {
    using S = decltype(tag);
    row_load_typed(src.as<const S>() + off, n, dst);
  });
}

// dst[off + i] += src[i] (rounded to nearest even on store for bf16/fp16).
template <class S, class T>
inline void row_accumulate_typed(S* dst, int64_t n, const T* src) {
  using C = typename ComputeOf<S>::type;
  for (int64_t i = 0; i < n; ++i) {
    store_value(dst[i], static_cast<C>(load_value(dst[i])) + static_cast<C>(src[i]));
  }
}
template <class T>
inline void row_accumulate(Tensor dst, int64_t off, int64_t n, const T* src) {
  dispatch_float(dst.dtype, [&](auto tag) {
    using S = decltype(tag);
    row_accumulate_typed(dst.as<S>() + off, n, src);
  });
}

}  // namespace ledgerlm::cpu
