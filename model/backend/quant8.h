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

namespace ledgerlm {

struct QuantMap {
  std::array<float, 256> value{};   // code -> value
  std::array<float, 256> sorted{};  // values in increasing order
  std::array<uint8_t, 256> sorted_code{};
};

const QuantMap& quant_map_signed();    // for m: [-1, 1]
const QuantMap& quant_map_unsigned();  // for v: [0, 1]

// Nearest code of x (already normalised to the map's range) by binary search over the sorted map.
uint8_t quant_encode(const QuantMap& map, float x);

// Encodes x[0..n) as one block: absmax = max|x| (0 gives all codes of value 0).
void quant_block_encode(const QuantMap& map, const float* x, int64_t n, uint8_t* codes,
                        float* absmax);
void quant_block_decode(const QuantMap& map, const uint8_t* codes, int64_t n, float absmax,
                        float* out);

}  // namespace ledgerlm
