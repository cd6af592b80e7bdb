// Where `prepare` cuts a document part into the chunks its threads encode one by one.
//
// The tokens of a part must not depend on how many threads encode it, nor on the chunk size: so
// the chunks' ends are chosen from a set of cut points that is a function of the part's bytes
// (and the tokenizer) alone, and every chunk is encoded on its own:
//   1. safe cuts, Tokenizer::safe_cut: places where encoding the two sides separately gives the
//      same tokens as encoding the whole (bytes: everywhere; bpe: around a newline, before a space
//      after a non-space; hf-bpe: where the tokenizer's own pre-tokenizer always ends a piece —
//      GPT-2's: before white space after a non-white-space character; Llama-3's and Qwen2's
//      regexes: hf_pretokenize.h — outside any added token). Cutting there changes nothing.
//   2. hard cuts, where text runs longer than kHardCutBytes (1 MiB) without a safe cut: one every
//      kHardCutBytes after the last safe cut before the run (moved back to the start of a UTF-8
//      character). The tokens there may differ from encoding the whole run at once — a piece of
//      letters is split in two — but they are the same for every thread count and chunk size,
//      because every hard cut is always cut and its place depends on the bytes only. Text with
//      spaces or line breaks at least once per MiB never gets one.
// A chunk starts at a cut point and ends at the last cut point within chunk_bytes of its start
// (at the first one after, when there is none within), and never runs past a hard cut, so a
// chunk holds at most max(chunk_bytes, kHardCutBytes) bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "data/tokenizer.h"

namespace ledgerlm {

inline constexpr uint64_t kHardCutBytes = uint64_t{1} << 20;
inline constexpr size_t kDefaultChunkBytes = size_t{1} << 20;

// Bytes [begin, begin + bytes.size()) of one document part (offsets within the part).
struct PartWindow {
  std::string_view bytes;
  uint64_t begin = 0;
  bool reaches_end = false;  // bytes run to the end of the part
};

// The end (an offset within the part) of the chunk that starts at the cut point `start`. The
// window must hold the part's bytes from start - tok.cut_context() (or the part's start) to
// start + chunk_reach() (or the part's end).
uint64_t chunk_end(const Tokenizer& tok, const PartWindow& window, uint64_t start,
                   uint64_t chunk_bytes);

// How many bytes past `start` the window of chunk_end must hold (unless it reaches the part's
// end): the furthest cut point it looks at, the context of safe_cut there, and one more byte.
inline uint64_t chunk_reach(const Tokenizer& tok, uint64_t chunk_bytes) {
  return (chunk_bytes > kHardCutBytes ? chunk_bytes : kHardCutBytes) + tok.cut_context() + 1;
}

}  // namespace ledgerlm
