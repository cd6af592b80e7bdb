// The dynamic quantization maps and block encode/decode (see quant8.h).
#include "model/backend/optim/quant8.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
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

// Order-preserving key of a (non-NaN) float: a < b <=> key(a) < key(b), -0 just below +0.
uint32_t order_key(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
float from_order_key(uint32_t k) {
  return std::bit_cast<float>((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
constexpr int kBucketShift = 32 - kQuantBucketBits;

QuantBuckets build_buckets(const QuantMap& map) {
  QuantBuckets q;
  for (uint32_t b = 0; b < (1u << kQuantBucketBits); ++b) {
    const float lowest = from_order_key(b << kBucketShift);
    if (std::isnan(lowest)) continue;  // NaN bit patterns: never encoded (index 0)
    const auto at = std::lower_bound(map.sorted.begin(), map.sorted.end(), lowest);
    q.first[b] = static_cast<uint8_t>(std::min<std::ptrdiff_t>(at - map.sorted.begin(), 255));
  }
  return q;
}

}  // namespace

const QuantBuckets& quant_buckets_signed() {
  static const QuantBuckets q = build_buckets(quant_map_signed());
  return q;
}

const QuantBuckets& quant_buckets_unsigned() {
  static const QuantBuckets q = build_buckets(quant_map_unsigned());
  return q;
}

uint8_t quant_encode_bucketed(const QuantMap& map, const QuantBuckets& buckets, float x) {
  if (!(x > map.sorted[0])) return quant_encode(map, x);  // at or below the map, or NaN
  if (x >= map.sorted[255]) return map.sorted_code[255];
  // sorted[0] < x < sorted[255]: a fixed number of conditional steps (no branch to mispredict);
  // once sorted[above] >= x it stays, so it never passes 255.
  int above = buckets.first[order_key(x) >> kBucketShift];
  for (int step = 0; step < kQuantBucketScanMax; ++step) above += map.sorted[above] < x ? 1 : 0;
  // The nearer of sorted[above - 1] (>= 0: sorted[0] < x) and sorted[above], ties to the lower:
  // an index computed without a branch (which way it goes is a coin toss per element).
  const int lower = x - map.sorted[above - 1] <= map.sorted[above] - x ? 1 : 0;
  return map.sorted_code[above - lower];
}

int quant_buckets_max_fill(const QuantMap& map) {
  std::array<int, 1u << kQuantBucketBits> fill{};
  int most = 0;
  for (int i = 1; i < 255; ++i)
    most = std::max(most, ++fill[order_key(map.sorted[i]) >> kBucketShift]);
  return most;
}

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
  // There are two maps, told apart by their range ([-1, 1] or [0, 1]; a copy of one is the same).
  const QuantBuckets& buckets =
      map.sorted[0] < 0.0f ? quant_buckets_signed() : quant_buckets_unsigned();
  for (int64_t i = 0; i < n; ++i) codes[i] = quant_encode_bucketed(map, buckets, x[i] * inv);
}

void quant_block_decode(const QuantMap& map, const uint8_t* codes, int64_t n, float absmax,
                        float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = map.value[codes[i]] * absmax;
}

}  // namespace ledgerlm
