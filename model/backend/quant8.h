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
// (host and device: the CUDA 8-bit AdamW kernel encodes with the same function).
LLM_HD inline uint8_t quant_encode(const QuantMap& map, float x) {
  // First sorted value >= x, then pick the nearer of it and its predecessor.
  int lo = 0, hi = 255;
  if (x <= map.sorted[0]) return map.sorted_code[0];
  if (x >= map.sorted[255]) return map.sorted_code[255];
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (map.sorted[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  const int below = lo - 1;
  return (x - map.sorted[below] <= map.sorted[lo] - x) ? map.sorted_code[below]
                                                       : map.sorted_code[lo];
}

// The factor a block's values are normalised by before encoding (0 for an all-zero block).
LLM_HD inline float quant_inverse_absmax(float absmax) {
  return absmax > 0.0f ? 1.0f / absmax : 0.0f;
}

// Encodes x[0..n) as one block: absmax = max|x| (0 gives all codes of value 0).
void quant_block_encode(const QuantMap& map, const float* x, int64_t n, uint8_t* codes,
                        float* absmax);
void quant_block_decode(const QuantMap& map, const uint8_t* codes, int64_t n, float absmax,
                        float* out);

}  // namespace ledgerlm
