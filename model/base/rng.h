// Counter-based random numbers (Philox-4x32-10). A value is a pure function of
// (seed, stream, counter), so init, data order, dropout and stochastic rounding replay exactly
// under recompute, sharding, accumulation changes and resume: no generator state to carry.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

#include "model/base/hd.h"

namespace ledgerlm {

LLM_HD inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr,
                                                 std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * ctr[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

// Random streams: distinct purposes never share numbers.
enum class RngStream : uint32_t { kInit = 1, kData = 2, kDropout = 3, kRounding = 4, kSample = 5 };

// Four uniform 32-bit words for (seed, stream, a, b): a and b are the caller's coordinates,
// e.g. (tensor index, element / 4) or (step, window).
LLM_HD inline std::array<uint32_t, 4> rng_bits(uint64_t seed, RngStream stream, uint64_t a,
                                               uint64_t b) {
  return philox4x32(
      {static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
       static_cast<uint32_t>(b >> 32) ^ (static_cast<uint32_t>(stream) << 24)},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

inline double rng_uniform01(uint32_t bits) {
  return (bits + 0.5) * (1.0 / 4294967296.0);
}

// Standard normal (Box-Muller) from two words.
inline double rng_normal(uint32_t u0, uint32_t u1) {
  double r = std::sqrt(-2.0 * std::log(rng_uniform01(u0)));
  return r * std::cos(6.283185307179586 * rng_uniform01(u1));
}

}  // namespace ledgerlm
