// LLM_HD marks a function that host code and CUDA kernels share: __host__ __device__ when the
// file is compiled by nvcc, nothing otherwise. Functions so marked are the single source of the
// per-element arithmetic (dtype conversions, counter-based random numbers, optimizer updates) that
// the CPU and CUDA backends both run, so both produce the same bits from the same inputs.
//
// Rules for an LLM_HD function: no exceptions, no allocation, no std:: calls that have no device
// overload (use the helpers below for bit casts), and only constexpr members of std::array
// (the CUDA build compiles with --expt-relaxed-constexpr).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define LLM_HD __host__ __device__
#else
#define LLM_HD
#endif

namespace ledgerlm {

// The bits of a float and back (std::memcpy on the host, the intrinsics on the device).
LLM_HD inline uint32_t f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
#endif
}
LLM_HD inline float f32_from_bits(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
#endif
}

}  // namespace ledgerlm
