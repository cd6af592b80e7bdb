// The byte-level alphabet (byte_level.h): a table built once in each direction.
#include "data/byte_level.h"

#include <array>

namespace ledgerlm {
namespace {

constexpr bool stands_for_itself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

constexpr std::array<uint32_t, 256> build_forward() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) cp[b] = stands_for_itself(b) ? b : next++;
  return cp;
}

// Built at compile time: usable from any static initializer.
constexpr std::array<uint32_t, 256> kCodePoint = build_forward();

void append_utf8(uint32_t cp, std::string* out) {
  // The alphabet lies below U+0800: one or two bytes.
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

uint32_t byte_level_code_point(uint8_t b) {
  return kCodePoint[b];
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(kCodePoint[static_cast<uint8_t>(c)], &out);
  return out;
}

bool byte_level_decode(std::string_view text, std::string* bytes) {
  // Code point -> byte for the alphabet, which spans U+0021..U+0143.
  static const std::array<int16_t, 0x144> kByte = [] {
    std::array<int16_t, 0x144> t;
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[kCodePoint[b]] = static_cast<int16_t>(b);
    return t;
  }();
  bytes->clear();
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    if (s[i] < 0x80) {
      cp = s[i];
      i += 1;
    } else if ((s[i] & 0xE0) == 0xC0 && i + 1 < text.size() && (s[i + 1] & 0xC0) == 0x80) {
      cp = ((s[i] & 0x1Fu) << 6) | (s[i + 1] & 0x3Fu);
      i += 2;
    } else {
      return false;  // three- and four-byte characters are outside the alphabet
    }
    if (cp >= kByte.size() || kByte[cp] < 0) return false;
    bytes->push_back(static_cast<char>(kByte[cp]));
  }
  return true;
}

}  // namespace ledgerlm
