// Element types ledgerlm stores, and the scalar conversions between them.
// bf16 and fp16 are storage formats on the CPU: kernels load them, compute in fp32, and store
// with round-to-nearest-even (or stochastic rounding where the config asks for it).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace ledgerlm {

enum class DType : uint8_t { kF32, kF64, kBF16, kF16, kU8, kI32, kU16 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);              // "fp32", "fp64", "bf16", "fp16", "u8", "i32", "u16"
const char* dtype_safetensors_name(DType t);  // "F32", "F64", "BF16", "F16", "U8", "I32", "U16"
// Parses "fp32" | "bf16" | "fp16" | "fp64" (also "f32"...); throws Error naming `what` otherwise.
DType dtype_parse(const std::string& text, const std::string& what);
bool dtype_parse_safetensors(const std::string& text, DType* out);

inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays NaN (quiet).
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x007fffffu)) return 0x7fc0;
  uint32_t rounding_bias = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding_bias) >> 16);
}

// Stochastic rounding: `random_bits` uniform in [0, 2^16) decides whether to round up.
inline uint16_t f32_to_bf16_stochastic(float f, uint32_t random_bits) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u) return f32_to_bf16(f);
  uint32_t r = bits + (random_bits & 0xffffu);
  return static_cast<uint16_t>(r >> 16);
}

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
uint16_t f32_to_f16_stochastic(float f, uint32_t random_bits);

}  // namespace ledgerlm
