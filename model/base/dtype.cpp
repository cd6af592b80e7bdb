// Element type names and IEEE half-precision conversion.
#include "model/base/dtype.h"

#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF32:
      return 4;
    case DType::kF64:
      return 8;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kU8:
      return 1;
    case DType::kI32:
      return 4;
    case DType::kU16:
      return 2;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "fp32";
    case DType::kF64:
      return "fp64";
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    case DType::kU8:
      return "u8";
    case DType::kI32:
      return "i32";
    case DType::kU16:
      return "u16";
  }
  return "?";
}

const char* dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "F32";
    case DType::kF64:
      return "F64";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kU8:
      return "U8";
    case DType::kI32:
      return "I32";
    case DType::kU16:
      return "U16";
  }
  return "?";
}

bool dtype_parse_safetensors(const std::string& text, DType* out) {
  static const struct {
    const char* name;
    DType t;
  } kNames[] = {{"F32", DType::kF32}, {"F64", DType::kF64}, {"BF16", DType::kBF16},
                {"F16", DType::kF16}, {"U8", DType::kU8},   {"I32", DType::kI32},
                {"U16", DType::kU16}};
  for (const auto& n : kNames) {
    if (text == n.name) {
      *out = n.t;
      return true;
    }
  }
  return false;
}

DType dtype_parse(const std::string& text, const std::string& what) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::kF32;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  if (text == "fp16" || text == "f16" || text == "float16") return DType::kF16;
  if (text == "fp64" || text == "f64" || text == "float64") return DType::kF64;
  fail(error_message(what, ": expected one of fp32, bf16, fp16 (got '", text, "')"));
}

float f16_to_f32(uint16_t h) {
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
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
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

uint16_t f32_to_f16_stochastic(float f, uint32_t random_bits) {
  // Round via the neighbours: pick the upper one with probability proportional to distance.
  uint16_t nearest = f32_to_f16(f);
  float back = f16_to_f32(nearest);
  if (!std::isfinite(f) || back == f) return nearest;
  uint16_t other = (std::fabs(back) < std::fabs(f)) ? static_cast<uint16_t>(nearest + 1)
                                                    : static_cast<uint16_t>(nearest - 1);
  float o = f16_to_f32(other);
  float lo = std::fmin(back, o), hi = std::fmax(back, o);
  float p_hi = (f - lo) / (hi - lo);
  float u = static_cast<float>(random_bits & 0xffffffu) / 16777216.0f;
  float chosen = (u < p_hi) ? hi : lo;
  return chosen == back ? nearest : other;
}

}  // namespace ledgerlm
