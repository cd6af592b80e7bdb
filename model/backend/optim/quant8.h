// 8-bit block-wise quantization with the dynamic (tree) map of arXiv 2110.02861, used by the
// 8-bit AdamW state.
//
// A code's bits, read from the top: a sign bit (signed map only), then the exponent as a run of
// e zero bits, then a 1 indicator bit, then f linear fraction bits (f = the bits left). Its value
// is 10^-e * (0.1 + 0.9 * (k + 1) / 2^f) with k the fraction: dense near 0 (down to 1e-6 signed,
// 1e-7 unsigned), linear within each decade, and 1.0 exactly representable. The all-zero
// magnitude is 0. Values are normalised by the block's absmax before encoding.
#pragma once

#include <array>
#include <cstdint>

#include "model/base/hd.h"

namespace ledgerlm {

struct QuantMap {
  std::array<float, 256> value{};   // code -> value
  std::array<float, 256> sorted{};  // values in increasing order
  std::array<uint8_t, 256> sorted_code{};
};

const QuantMap& quant_map_signed();    // for m: [-1, 1]
const QuantMap& quant_map_unsigned();  // for v: [0, 1]

// Nearest code of x (already normalised to the map's range) by binary search over the sorted map
// (the CUDA 8-bit AdamW kernel encodes with it; the CPU with quant_encode_bucketed below, which
// gives the same codes in fewer steps). Each halving is a conditional add, not a jump.
LLM_HD inline uint8_t quant_encode(const QuantMap& map, float x) {
  if (x <= map.sorted[0]) return map.sorted_code[0];
  if (x >= map.sorted[255]) return map.sorted_code[255];
  // below: the last sorted value < x (sorted[0] < x < sorted[255] here); the one after it is the
  // first >= x. Pick the nearer of the two (ties to the lower).
  int below = 0;
  for (int step = 128; step >= 1; step >>= 1) below += map.sorted[below + step] < x ? step : 0;
  const int above = below + 1;
  return (x - map.sorted[below] <= map.sorted[above] - x) ? map.sorted_code[below]
                                                          : map.sorted_code[above];
}

// The same code in a few steps (host only; quant_block_encode uses it): the float line is cut into
// 2^14 buckets of an order-preserving key of the bits (32 per octave), each knowing the sorted
// index its smallest value would take; from there kQuantBucketScanMax conditional steps (no
// bucket within the map's range holds more values) reach the first value >= x, so the result is
// the binary search's, code for code (tests/unit/optim/test_optim_8bit.cpp compares them).
constexpr int kQuantBucketBits = 14;
constexpr int kQuantBucketScanMax = 3;
struct QuantBuckets {
  std::array<uint8_t, 1u << kQuantBucketBits> first{};  // sorted index of the bucket's minimum
};
const QuantBuckets& quant_buckets_signed();
const QuantBuckets& quant_buckets_unsigned();
uint8_t quant_encode_bucketed(const QuantMap& map, const QuantBuckets& buckets, float x);

// The factor a block's values are normalised by before encoding (0 for an all-zero block).
LLM_HD inline float quant_inverse_absmax(float absmax) {
  return absmax > 0.0f ? 1.0f / absmax : 0.0f;
}

// Encodes x[0..n) as one block: absmax = max|x| (0 gives all codes of value 0).
void quant_block_encode(const QuantMap& map, const float* x, int64_t n, uint8_t* codes,
                        float* absmax);
void quant_block_decode(const QuantMap& map, const uint8_t* codes, int64_t n, float absmax,
                        float* out);

// The largest number of sorted map values in one bucket between sorted[0] and sorted[255] (what
// the steps of quant_encode_bucketed must cover; at most kQuantBucketScanMax).
int quant_buckets_max_fill(const QuantMap& map);

}  // namespace ledgerlm
