// Element storage shared by the host and device kernels: the storage types of every float dtype,
// widening loads and rounding stores, and dispatch from a runtime DType to a typed kernel. The
// element functions are LLM_HD, so the CPU loops and the CUDA kernels widen and round through
// the same source (model/base/dtype.h's conversions) and store the same bits.
//
// Kernels are templates over a storage type S (float, double, Bf16, Half) and a compute type T
// (float, or double for fp64 gradient checks). bf16/fp16 values are widened to fp32 on load and
// rounded to nearest even on store, as backend.h specifies.
#pragma once

#include <cstdint>

#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/base/hd.h"

namespace ledgerlm {

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
// (random_keys.h's rounding_bits on both backends).
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

// Calls f(S{}) with S the storage type of `t`. Callers validate the dtype first; the fallback
// throw is for direct misuse (never inside a parallel region).
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
  fail(error_message("backend: expected a float dtype, got ", dtype_name(t)));
}

// Calls f(T{}) with T float or double (activation dtypes).
template <class F>
decltype(auto) dispatch_act(DType t, F&& f) {
  if (t == DType::kF64) return f(double{});
  if (t == DType::kF32) return f(float{});
  fail(error_message("backend: activations must be fp32 or fp64, got ", dtype_name(t)));
}

}  // namespace ledgerlm
