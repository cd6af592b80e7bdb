// unicode_class(): a flat table for the Basic Multilingual Plane (64 KiB, built once from the
// generated ranges) because almost all text lives there and the pre-tokenizer asks for every
// code point; a binary search over the ranges for the supplementary planes (emoji, rare CJK).
#include "data/unicode_classes.h"

#include <algorithm>
#include <array>

namespace ledgerlm {
namespace {

using unicode_detail::kClassRangeCount;
using unicode_detail::kClassRanges;

constexpr uint32_t kBmpSize = 0x10000;

std::array<UnicodeClass, kBmpSize> build_bmp_table() {
  std::array<UnicodeClass, kBmpSize> table{};  // kOther
  for (size_t i = 0; i < kClassRangeCount; ++i) {
    const auto& r = kClassRanges[i];
    for (uint32_t cp = r.first; cp <= r.last && cp < kBmpSize; ++cp) table[cp] = r.cls;
  }
  return table;
}

// kClassRanges is constant-initialized, so it is ready before this dynamic initialization runs.
const std::array<UnicodeClass, kBmpSize> kBmpTable = build_bmp_table();

}  // namespace

UnicodeClass unicode_class(uint32_t cp) {
  if (cp < kBmpSize) return kBmpTable[cp];
  const auto* end = kClassRanges + kClassRangeCount;
  const auto* it = std::upper_bound(kClassRanges, end, cp, [](uint32_t c, const auto& r) {
    return c < r.first;
  });  // the first range starting after cp; the one before it may hold cp
  if (it == kClassRanges) return UnicodeClass::kOther;
  --it;
  return cp <= it->last ? it->cls : UnicodeClass::kOther;
}

const char* unicode_version() {
  return unicode_detail::kUnicodeVersion;
}

}  // namespace ledgerlm
