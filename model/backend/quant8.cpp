// The dynamic quantization maps and block encode/decode (see quant8.h).
#include "model/backend/quant8.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ledgerlm {
namespace {

// Value of a magnitude code with `bits` bits (7 for signed, 8 for unsigned).
double magnitude_value(unsigned code, int bits) {
  if (code == 0) return 0.0;
  int e = 0;  // leading zeros before the indicator bit
  while (!(code & (1u << (bits - 1 - e)))) ++e;
  const int f = bits - 1 - e;  // fraction bits after the indicator
  const unsigned k = code & ((1u << f) - 1u);
  const double frac = 0.1 + 0.9 * static_cast<double>(k + 1) / static_cast<double>(1u << f);
  return std::pow(10.0, -e) * frac;
}

QuantMap build_map(bool is_signed) {
  QuantMap map;
  for (unsigned c = 0; c < 256; ++c) {
    double v;
    if (is_signed) {
      v = magnitude_value(c & 0x7fu, 7);
      if (c & 0x80u) v = -v;  // code 0x80 is a second zero
    } else {
      v = magnitude_value(c, 8);
    }
    map.value[c] = static_cast<float>(v);
  }
  std::array<int, 256> order;
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return map.value[a] < map.value[b]; });
  for (int i = 0; i < 256; ++i) {
    map.sorted[i] = map.value[order[i]];
    map.sorted_code[i] = static_cast<uint8_t>(order[i]);
  }
  return map;
}

}  // namespace

const QuantMap& quant_map_signed() {
  static const QuantMap map = build_map(true);
  return map;
}

const QuantMap& quant_map_unsigned() {
  static const QuantMap map = build_map(false);
  return map;
}

void quant_block_encode(const QuantMap& map, const float* x, int64_t n, uint8_t* codes,
                        float* absmax) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  *absmax = amax;
  const float inv = quant_inverse_absmax(amax);
  for (int64_t i = 0; i < n; ++i) codes[i] = quant_encode(map, x[i] * inv);
}

void quant_block_decode(const QuantMap& map, const uint8_t* codes, int64_t n, float absmax,
                        float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = map.value[codes[i]] * absmax;
}

}  // namespace ledgerlm
