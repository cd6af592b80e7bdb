// The GPT-2 split pattern as a hand-written matcher (see pretokenize_gpt2.h for the pattern).
#include "data/pretokenize_gpt2.h"

#include <cstdint>

#include "data/unicode_classes.h"

namespace ledgerlm {
namespace {

// One decoded code point: its class and its length in bytes. Past the end: kEnd, length 0.
struct CodePoint {
  int cls;  // a UnicodeClass value, or kEnd
  size_t len;
};
constexpr int kEnd = -1;
constexpr int kSpace = static_cast<int>(UnicodeClass::kSpace);

// The input is valid UTF-8 (checked by the caller), so the lead byte gives the length.
CodePoint at(std::string_view s, size_t i) {
  if (i >= s.size()) return {kEnd, 0};
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  uint32_t cp;
  size_t len;
  if (p[0] < 0x80) {
    cp = p[0];
    len = 1;
  } else if (p[0] < 0xE0) {
    cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    len = 2;
  } else if (p[0] < 0xF0) {
    cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    len = 3;
  } else {
    cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    len = 4;
  }
  return {static_cast<int>(unicode_class(cp)), len};
}

// The end of the run of code points of class `cls` that starts at i.
size_t run_end(std::string_view s, size_t i, int cls) {
  for (CodePoint c = at(s, i); c.cls == cls; c = at(s, i)) i += c.len;
  return i;
}

// The length of the contraction ('s 't 're 've 'm 'll 'd) at i, 0 if none. Case-sensitive, as
// in the pattern: "'S" is not one (the apostrophe then starts a symbol run).
size_t contraction_len(std::string_view s, size_t i) {
  if (s[i] != '\'' || i + 1 >= s.size()) return 0;
  const char a = s[i + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (i + 2 >= s.size()) return 0;
  const char b = s[i + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

bool Gpt2Splitter::next(std::string_view* piece) {
  const std::string_view s = text_;
  const size_t start = pos_;
  if (start >= s.size()) return false;
  size_t end;
  if (size_t c = contraction_len(s, start)) {
    end = start + c;
  } else {
    // ` ?X+` for X = letter, number, other: an optional ASCII space, then a run of one class.
    const size_t body = s[start] == ' ' ? start + 1 : start;
    const CodePoint first = at(s, body);
    if (first.cls != kSpace && first.cls != kEnd) {
      end = run_end(s, body, first.cls);
    } else {
      // White space at `start` (a lone trailing ' ' is white space too): `\s+(?!\S)` takes the
      // whole run at the end of the text, else the run less its last code point when that leaves
      // at least one; `\s+` takes a run of one before a non-space.
      size_t last = start;  // start of the run's last code point
      size_t i = start;
      for (CodePoint c = at(s, i); c.cls == kSpace; c = at(s, i)) {
        last = i;
        i += c.len;
      }
      end = (i == s.size() || last == start) ? i : last;
    }
  }
  *piece = s.substr(start, end - start);
  pos_ = end;
  return true;
}

}  // namespace ledgerlm
