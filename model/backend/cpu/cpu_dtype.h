// Element access for the CPU kernels: storage types for every float dtype, widening loads and
// rounding stores, and dispatch from a runtime DType to a typed kernel.
//
// Kernels are templates over a storage type S (float, double, Bf16, Half) and a compute type T
// (float, or double for fp64 gradient checks). bf16/fp16 values are widened to fp32 on load and
// rounded to nearest even on store, as backend.h specifies.
#pragma once

#include <cstdint>

#include "model/backend/backend.h"
#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/base/hd.h"

namespace ledgerlm::cpu {

// 16-bit storage formats as distinct types so that overloads and templates can tell them apart.
struct Bf16 {
  uint16_t bits;
};
struct Half {
  uint16_t bits;
};

LLM_HD inline float load_value(float v) {
  return v;
}
LLM_HD inline double load_value(double v) {
  return v;
}
LLM_HD inline float load_value(Bf16 v) {
  return bf16_to_f32(v.bits);
}
LLM_HD inline float load_value(Half v) {
  return f16_to_f32(v.bits);
}

template <class V>
LLM_HD inline void store_value(float& dst, V v) {
  dst = static_cast<float>(v);
}
template <class V>
LLM_HD inline void store_value(double& dst, V v) {
  dst = static_cast<double>(v);
}
template <class V>
LLM_HD inline void store_value(Bf16& dst, V v) {
  dst.bits = f32_to_bf16(static_cast<float>(v));
}
template <class V>
LLM_HD inline void store_value(Half& dst, V v) {
  dst.bits = f32_to_f16(static_cast<float>(v));
}

// Rounds v into dst, stochastically for 16-bit formats; `bits` are 32 uniform random bits
// (host and device: the CUDA casts call the same functions).
template <class V>
LLM_HD inline void store_stochastic(float& dst, V v, uint32_t) {
  dst = static_cast<float>(v);
}
template <class V>
LLM_HD inline void store_stochastic(double& dst, V v, uint32_t) {
  dst = static_cast<double>(v);
}
template <class V>
LLM_HD inline void store_stochastic(Bf16& dst, V v, uint32_t bits) {
  dst.bits = f32_to_bf16_stochastic(static_cast<float>(v), bits);
}
template <class V>
LLM_HD inline void store_stochastic(Half& dst, V v, uint32_t bits) {
  dst.bits = f32_to_f16_stochastic(static_cast<float>(v), bits);
}

// The arithmetic type a storage type computes in: double for fp64, fp32 for everything else.
template <class S>
struct ComputeOf {
  using type = float;
};
template <>
struct ComputeOf<double> {
  using type = double;
};

inline bool dtype_is_float(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kBF16 || t == DType::kF16;
}
inline bool dtype_is_act(DType t) {
  return t == DType::kF32 || t == DType::kF64;
}

// Checks done at op entry, before any parallel region (an exception must never leave one).
inline void require_float(const Tensor& t, const char* what) {
  LLM_REQUIRE(t.data != nullptr, "cpu backend: ", what, " is null");
  LLM_REQUIRE(dtype_is_float(t.dtype), "cpu backend: ", what, " must be fp32/fp64/bf16/fp16, got ",
              dtype_name(t.dtype));
}
inline void require_act(const Tensor& t, DType act, const char* what) {
  LLM_REQUIRE(t.data != nullptr, "cpu backend: ", what, " is null");
  LLM_REQUIRE(t.dtype == act, "cpu backend: ", what, " must have the activation dtype ",
              dtype_name(act), ", got ", dtype_name(t.dtype));
}
inline DType require_act_dtype(const Tensor& t, const char* what) {
  LLM_REQUIRE(t.data != nullptr, "cpu backend: ", what, " is null");
  LLM_REQUIRE(dtype_is_act(t.dtype), "cpu backend: ", what, " must be fp32 or fp64, got ",
              dtype_name(t.dtype));
  return t.dtype;
}

// Calls f(S{}) with S the storage type of `t`. Callers validate the dtype first (require_*);
// the fallback throw is for direct misuse outside a parallel region.
template <class F>
decltype(auto) dispatch_float(DType t, F&& f) {
  switch (t) {
    case DType::kF32:
      return f(float{});
    case DType::kF64:
      return f(double{});
    case DType::kBF16:
      return f(Bf16{});
    case DType::kF16:
      return f(Half{});
    default:
      break;
  }
  fail(error_message("cpu backend: expected a float dtype, got ", dtype_name(t)));
}

// Calls f(T{}) with T float or double (activation dtypes).
template <class F>
decltype(auto) dispatch_act(DType t, F&& f) {
  if (t == DType::kF64) return f(double{});
  if (t == DType::kF32) return f(float{});
  fail(error_message("cpu backend: activations must be fp32 or fp64, got ", dtype_name(t)));
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
