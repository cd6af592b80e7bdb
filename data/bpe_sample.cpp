// The bpe tokenizer's training sample (see bpe_sample.h).
#include "data/bpe_sample.h"

#include <algorithm>
#include <cstring>

#include "data/tokenizer.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

// Appends bytes [begin, end) of `file` to the sample as one training text, after checking they
// are UTF-8. `trim_front` / `trim_back`: the piece starts / ends inside a train part, so it is
// trimmed to whole lines (or, in a piece without a line break, whole characters).
void add_piece(const InputFile& file, uint64_t begin, uint64_t end, bool trim_front, bool trim_back,
               std::vector<std::pair<size_t, size_t>>* spans, std::string* text) {
  const size_t at = text->size();
  text->resize(at + static_cast<size_t>(end - begin));
  const size_t got = file.read_at(begin, text->data() + at, static_cast<size_t>(end - begin));
  LLM_REQUIRE(got == end - begin, "--input ", file.name(), ": changed while being read (",
              file.size(), " bytes when opened)");
  std::string_view piece(text->data() + at, got);
  size_t lo = 0, hi = piece.size();
  auto continuation = [&](size_t i) {
    return (static_cast<unsigned char>(piece[i]) & 0xC0) == 0x80;
  };
  if (trim_front) {
    const size_t nl = piece.find('\n');
    if (nl != std::string_view::npos && nl + 1 < piece.size()) {
      lo = nl + 1;
    } else {
      while (lo < hi && continuation(lo)) ++lo;
    }
  }
  if (trim_back) {
    const size_t nl = piece.rfind('\n');
    if (nl != std::string_view::npos && nl + 1 > lo) {
      hi = nl + 1;
    } else {
      // Drop a last character the window cut short: find its lead byte, compare its length.
      size_t lead = hi;
      while (lead > lo && hi - lead < 4 && continuation(lead - 1)) --lead;
      if (lead > lo) {
        const auto c = static_cast<unsigned char>(piece[lead - 1]);
        const size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (lead - 1 + len > hi) hi = lead - 1;
      }
    }
  }
  size_t bad = 0;
  LLM_REQUIRE(utf8_is_valid(piece.substr(lo, hi - lo), &bad), "--input ", file.name(),
              ": not valid UTF-8 text (bad byte at offset ", begin + lo + bad,
              "); use --tokenizer bytes for binary data");
  // Keep only [lo, hi) of what was read.
  std::memmove(text->data() + at, text->data() + at + lo, hi - lo);
  text->resize(at + (hi - lo));
  if (hi > lo) spans->push_back({at, hi - lo});
}

}  // namespace

BpeSample bpe_sample(const DocumentWalk& walk, uint64_t cap_bytes) {
  LLM_REQUIRE(cap_bytes > 0, "--bpe-sample-mb must be > 0");
  BpeSample sample;
  std::vector<std::pair<size_t, size_t>> spans;  // offset, length in sample.text
  // First walk: everything while it fits under the cap, and the total.
  bool over = false;
  walk([&](const InputFile& file, uint64_t train_bytes) {
    sample.train_bytes += train_bytes;
    if (sample.train_bytes > cap_bytes) over = true;
    if (!over && train_bytes > 0)
      add_piece(file, 0, train_bytes, false, false, &spans, &sample.text);
  });
  sample.whole = !over;
  if (over) {
    // Second walk: S windows of w bytes, window k at floor(k * total / S) of the train stream.
    // total > cap >= S * w, so windows never overlap.
    sample.text.clear();
    sample.text.shrink_to_fit();
    spans.clear();
    const uint64_t w = std::min(kSampleWindowBytes, cap_bytes);
    const uint64_t windows = cap_bytes / w;
    const uint64_t total = sample.train_bytes;
    auto window_start = [&](uint64_t k) {
      return static_cast<uint64_t>(static_cast<unsigned __int128>(k) * total / windows);
    };
    sample.text.reserve(static_cast<size_t>(windows * w));
    uint64_t base = 0, k = 0;
    walk([&](const InputFile& file, uint64_t train_bytes) {
      while (k < windows && window_start(k) + w <= base) ++k;
      for (uint64_t j = k; j < windows && window_start(j) < base + train_bytes; ++j) {
        const uint64_t begin = std::max(window_start(j), base) - base;
        const uint64_t end = std::min(window_start(j) + w, base + train_bytes) - base;
        add_piece(file, begin, end, begin > 0, end < train_bytes, &spans, &sample.text);
      }
      base += train_bytes;
    });
  }
  for (const auto& [offset, length] : spans)
    sample.parts.emplace_back(sample.text.data() + offset, length);
  return sample;
}

}  // namespace ledgerlm
