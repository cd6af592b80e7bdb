// Chunk ends for prepare's parallel encoding (see chunker.h for the rules).
//
// The cut points of a part form a chain: from a cut point u, the next ones are the safe cuts in
// (u, u + H]; when there is none, the hard cut at u + H (H = kHardCutBytes) is. chunk_end walks
// that chain from the chunk's start in steps of up to H bytes, each step looking backwards from
// its far end for the last safe cut (in ordinary text one is a few bytes away), so finding a
// chunk's end costs little next to encoding it.
#include "data/chunker.h"

#include <algorithm>
#include <optional>

#include "model/base/check.h"

namespace ledgerlm {

uint64_t chunk_end(const Tokenizer& tok, const PartWindow& w, uint64_t start,
                   uint64_t chunk_bytes) {
  LLM_ASSERT(chunk_bytes > 0 && start >= w.begin && start < w.begin + w.bytes.size());
  const uint64_t window_end = w.begin + w.bytes.size();
  const uint64_t part_end = w.reaches_end ? window_end : UINT64_MAX;
  LLM_ASSERT(w.reaches_end || window_end >= start + chunk_reach(tok, chunk_bytes),
             "chunk window too short");
  const uint64_t target = start + chunk_bytes;
  auto safe = [&](uint64_t p) { return p == part_end || tok.safe_cut(w.bytes, p - w.begin); };
  // The last safe cut in (lo, hi], and the first.
  auto last_safe = [&](uint64_t lo, uint64_t hi) -> std::optional<uint64_t> {
    for (uint64_t p = hi; p > lo; --p)
      if (safe(p)) return p;
    return std::nullopt;
  };
  auto first_safe = [&](uint64_t lo, uint64_t hi) -> std::optional<uint64_t> {
    for (uint64_t p = lo + 1; p <= hi; ++p)
      if (safe(p)) return p;
    return std::nullopt;
  };
  // The hard cut after cut point u: u + H, moved back to the start of a UTF-8 character (at most
  // 3 bytes; in text that is not UTF-8 it stays where it is).
  auto hard_cut = [&](uint64_t u) {
    uint64_t p = u + kHardCutBytes;
    for (int k = 0; k < 3 && (static_cast<unsigned char>(w.bytes[p - w.begin]) & 0xC0) == 0x80; ++k)
      --p;
    return p;
  };

  uint64_t u = start;  // the furthest cut point reached so far
  while (true) {
    const uint64_t reach = std::min(u + kHardCutBytes, part_end);
    if (reach <= target) {
      // The whole step fits in the chunk: go to its last cut point, or stop at its hard cut.
      if (reach == part_end) return part_end;
      if (auto s = last_safe(u, reach)) {
        u = *s;
        continue;
      }
      return hard_cut(u);
    }
    // The step passes the target: the last cut point before it ends the chunk.
    if (auto s = last_safe(u, target)) return *s;
    if (u > start) return u;
    // No cut point within chunk_bytes of the start: the first one after.
    if (auto s = first_safe(target, reach)) return *s;
    return hard_cut(u);
  }
}

}  // namespace ledgerlm
