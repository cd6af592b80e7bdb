// The classes of Unicode code points that the GPT-2 pre-tokenizer (pretokenize_gpt2.h) tells
// apart: letters (\p{L}), numbers (\p{N}), white space (\s, Unicode's White_Space property) and
// everything else. The tables (unicode_class_ranges.cpp) are generated from one Unicode version
// by scripts/gen_unicode_classes.py; unicode_version() names it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ledgerlm {

enum class UnicodeClass : uint8_t { kOther = 0, kLetter = 1, kNumber = 2, kSpace = 3 };

// The class of code point `cp` (any value; past U+10FFFF is kOther). One table read for the
// Basic Multilingual Plane, a binary search above it.
UnicodeClass unicode_class(uint32_t cp);

// The Unicode version of the tables, e.g. "14.0.0".
const char* unicode_version();

namespace unicode_detail {
struct UnicodeRange {
  uint32_t first;
  uint32_t last;  // inclusive
  UnicodeClass cls;
};
// Generated: sorted, disjoint ranges of the classes other than kOther.
extern const UnicodeRange kClassRanges[];
extern const size_t kClassRangeCount;
extern const char kUnicodeVersion[];
}  // namespace unicode_detail

}  // namespace ledgerlm
