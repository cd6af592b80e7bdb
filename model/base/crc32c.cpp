// CRC-32C with a hardware path (SSE4.2) and a byte-table fallback (see crc32c.h).
#include "model/base/crc32c.h"

#include <array>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace ledgerlm {
namespace {

constexpr uint32_t kPolyReflected = 0x82f63b78u;  // Castagnoli polynomial, bit-reversed

std::array<uint32_t, 256> make_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ kPolyReflected : c >> 1;
    t[i] = c;
  }
  return t;
}

uint32_t crc_table(const uint8_t* p, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_table();
  for (size_t i = 0; i < n; ++i) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc_hw(const uint8_t* p, size_t n, uint32_t crc) {
  uint64_t c = crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = _mm_crc32_u64(c, word);
    p += 8;
    n -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (n > 0) {
    c32 = _mm_crc32_u8(c32, *p++);
    --n;
  }
  return c32;
}

bool have_hw() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

uint32_t crc32c(const void* data, size_t bytes, uint32_t crc) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
#if defined(__x86_64__)
  if (have_hw()) return ~crc_hw(p, bytes, crc);
#endif
  return ~crc_table(p, bytes, crc);
}

std::string crc32c_text(uint32_t crc) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "crc32c:%08x", crc);
  return buf;
}

bool crc32c_parse(const std::string& text, uint32_t* crc) {
  if (text.size() != 15 || text.rfind("crc32c:", 0) != 0 ||
      text.find_first_not_of("0123456789abcdefABCDEF", 7) != std::string::npos)
    return false;
  uint32_t v = 0;
  for (size_t i = 7; i < text.size(); ++i) {
    const char c = text[i];
    const uint32_t d =
        c <= '9' ? static_cast<uint32_t>(c - '0') : static_cast<uint32_t>((c | 0x20) - 'a' + 10);
    v = (v << 4) | d;
  }
  *crc = v;
  return true;
}

}  // namespace ledgerlm
