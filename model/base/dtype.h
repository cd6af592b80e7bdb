// Element types ledgerlm stores, and the scalar conversions between them.
// bf16 and fp16 are storage formats on the CPU: kernels load them, compute in fp32, and store
// with round-to-nearest-even (or stochastic rounding where the config asks for it).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "model/base/hd.h"

namespace ledgerlm {

enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kU8, kI32, kU16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);              // "fp32", "fp64", "bf16", "fp16", "u8", "i32", "u16"
const char* dtype_safetensors_name(DType t);  // "F32", "F64", "BF16", "F16", "U8", "I32", "U16"
// Parses "fp32" | "bf16" | "fp16" | "fp64" (also "f32"...); throws Error naming `what` otherwise.
DType dtype_parse(const std::string& text, const std::string& what);
bool dtype_parse_safetensors(const std::string& text, DType* out);

LLM_HD inline float bf16_to_f32(uint16_t h) {
  return f32_from_bits(static_cast<uint32_t>(h) << 16);
}

// Round to nearest even; NaN stays NaN (quiet).
LLM_HD inline uint16_t f32_to_bf16(float f) {
  const uint32_t bits = f32_bits(f);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return 0x7fc0;
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// Stochastic rounding: `random_bits` uniform in [0, 2^16) decides whether to round up.
LLM_HD inline uint16_t f32_to_bf16_stochastic(float f, uint32_t random_bits) {
  const uint32_t bits = f32_bits(f);
  if ((bits & 0x7f800000u) == 0x7f800000u) return f32_to_bf16(f);
  uint32_t r = bits + (random_bits & 0xffffu);
  return static_cast<uint16_t>(r >> 16);
}

// IEEE half precision (round to nearest even on the way down).
LLM_HD inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while (!(mant & 0x400));
      mant &= 0x3ff;
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | mant << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return f32_from_bits(bits);
}

LLM_HD inline uint16_t f32_to_f16(float f) {
  const uint32_t bits = f32_bits(f);
  uint32_t sign = (bits >> 16) & 0x8000u;
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u)
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0));
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                      // subnormal or zero in fp16
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // < half the smallest subnormal
    uint32_t exp = abs >> 23;
    uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - exp;  // 113 - exp + 13
    uint32_t half_mant = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_mant & 1))) ++half_mant;
    return static_cast<uint16_t>(sign | half_mant);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return static_cast<uint16_t>(sign | ((rounded - (112u << 23)) >> 13));
}

// Stochastic rounding to fp16: round via the neighbours, picking the upper one with probability
// proportional to the distance (the low 24 random bits decide). Comparisons stand in for
// isfinite/fabs/fmin/fmax (no NaN reaches them), so host and device share the code.
LLM_HD inline uint16_t f32_to_f16_stochastic(float f, uint32_t random_bits) {
  uint16_t nearest = f32_to_f16(f);
  float back = f16_to_f32(nearest);
  if ((f32_bits(f) & 0x7f800000u) == 0x7f800000u || back == f) return nearest;
  const float abs_back = f32_from_bits(f32_bits(back) & 0x7fffffffu);
  const float abs_f = f32_from_bits(f32_bits(f) & 0x7fffffffu);
  uint16_t other =
      (abs_back < abs_f) ? static_cast<uint16_t>(nearest + 1) : static_cast<uint16_t>(nearest - 1);
  float o = f16_to_f32(other);
  float lo = back < o ? back : o, hi = back < o ? o : back;
  float p_hi = (f - lo) / (hi - lo);
  float u = static_cast<float>(random_bits & 0xffffffu) / 16777216.0f;
  float chosen = (u < p_hi) ? hi : lo;
  return chosen == back ? nearest : other;
}

}  // namespace ledgerlm
