// The random bits of stochastic rounding and dropout, as pure functions of their keys: the CPU
// and CUDA backends draw the same bits for the same element from these LLM_HD functions (one
// Philox call, rng_bits, serves four consecutive elements).
#pragma once

#include <array>
#include <cstdint>

#include "model/base/hd.h"
#include "model/base/rng.h"

namespace ledgerlm {

// The 32 random bits stochastic rounding uses for element `index` of a stream: word index%4 of
// rng_bits(seed, kRounding, index / 4, 0). A pure function of (seed, index), so shards and
// resumes see the same bits for the same global element.
LLM_HD inline std::array<uint32_t, 4> rounding_words(uint64_t seed, uint64_t index) {
  return rng_bits(seed, RngStream::kRounding, index >> 2, 0);
}
LLM_HD inline uint32_t rounding_bits(uint64_t seed, uint64_t index) {
  return rounding_words(seed, index)[index & 3];
}

// The dropout mask's bits of element `index` of global-batch sequence `sequence` (DropoutKey in
// backend.h): word index%4 of rng_bits(seed, kDropout, site, (sequence << 40) | index / 4). An
// element is kept iff its bits >= dropout_threshold(p), i.e. with probability 1 - p.
LLM_HD inline std::array<uint32_t, 4> dropout_words(uint64_t seed, uint64_t site, uint64_t sequence,
                                                    uint64_t index) {
  return rng_bits(seed, RngStream::kDropout, site, (sequence << 40) | (index >> 2));
}
LLM_HD inline uint32_t dropout_bits(uint64_t seed, uint64_t site, uint64_t sequence,
                                    uint64_t index) {
  return dropout_words(seed, site, sequence, index)[index & 3];
}
inline uint64_t dropout_threshold(double p) {
  return static_cast<uint64_t>(p * 4294967296.0 + 0.5);
}

}  // namespace ledgerlm
