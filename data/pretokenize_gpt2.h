// GPT-2's pre-tokenization: the split of text into the pieces that BPE then encodes one by one,
// written out by hand as the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches it (leftmost match, alternatives tried in order, greedy repetition). By hand rather than
// with std::regex because std::regex has no \p{...} classes, no lookahead over code points and is
// slow; the classes come from unicode_classes.h. What the pattern does, in words:
//   - a contraction ('s 't 're 've 'm 'll 'd, lower case only) is a piece of its own;
//   - a run of letters, a run of numbers, or a run of other symbols is one piece, with at most
//     one ASCII space in front of it;
//   - a run of white space is one piece, except that when a non-space follows it the run's last
//     character is left to start the next piece (so " word" keeps its space) — a run of a single
//     white-space character before a non-space is a piece by itself.
#pragma once

#include <cstddef>
#include <string_view>

namespace ledgerlm {

// Splits valid UTF-8 text (the caller checks) into GPT-2 pieces, in order; the pieces
// concatenate to the text. Usage: Gpt2Splitter s(text); std::string_view p; while (s.next(&p)).
class Gpt2Splitter {
 public:
  explicit Gpt2Splitter(std::string_view text) : text_(text) {}
  // The next piece, or false at the end of the text.
  bool next(std::string_view* piece);

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace ledgerlm
