// The normalizer and pre-tokenizer of a Hugging Face tokenizer.json as ledgerlm runs them, for the
// byte-level BPE families it reproduces exactly (GPT-2, SmolLM2, Qwen2, Llama-3):
//   normalizer     none, or NFC (Qwen2), alone or in a Sequence: run with utf8proc;
//   pre-tokenizer  a sequence of steps, each splitting every piece of the one before:
//                    Split(regex, Isolated)       the tokenizer's own regex, run with PCRE2 (UTF,
//                                                 UCP, JIT): every match and every gap between
//                                                 matches is a piece;
//                    Digits(individual_digits)    each digit alone, or runs of digits, apart;
//                    ByteLevel(use_regex: true)   GPT-2's pattern (pretokenize_gpt2.h), last;
//                  (ByteLevel's byte-to-character mapping is a spelling of the vocabulary only:
//                  ledgerlm keeps pieces as bytes).
//
// Where a text may be cut for parallel encoding (hf_safe_cut) follows these steps: the first
// splitting step fixes a piece boundary, every later step splits within pieces, so a cut at a
// boundary that the splitting steps keep wherever the text is cut changes nothing. The rule of
// each regex is known for the regexes ledgerlm accepts (GPT-2's, Llama-3's, Qwen2's): a Split
// with any other regex is refused, since a cut rule derived from an unknown pattern could not be
// shown to keep the ids.
//   GPT-2's pattern     before ASCII white space that follows a non-white-space character (no
//                       piece holds a non-space followed by a space);
//   Llama-3's, Qwen2's  before ' ' or '\t' that follows a non-white-space character (only a run
//                       of symbols takes white space after it, and only \r and \n), and after
//                       '\n' before a non-white-space character (a piece holding '\n' is all
//                       white space);
//   Digits              never between two digits.
// NFC never composes across these cuts: the character on the right of each is a space, a tab
// or a character after '\n', and neither side of such a pair composes or reorders with the
// other.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ledgerlm {

class HfRegex;  // a compiled PCRE2 pattern (hf_pretokenize.cpp)

struct HfPreStep {
  enum class Kind { kGpt2, kRegex, kDigits };
  enum class CutRule { kGpt2, kLlama3 };
  Kind kind = Kind::kGpt2;
  std::shared_ptr<const HfRegex> regex;  // kRegex
  CutRule cut = CutRule::kGpt2;          // kGpt2, kRegex
  bool individual_digits = false;        // kDigits
  std::string pattern;                   // kRegex: the regex as tokenizer.json spells it
};

struct HfPipeline {
  bool nfc = false;
  std::vector<HfPreStep> steps;
  // GPT-2's own set-up: no normalizer, the ByteLevel pattern alone.
  bool is_gpt2() const {
    return !nfc && steps.size() == 1 && steps[0].kind == HfPreStep::Kind::kGpt2;
  }
};

// The cut rule of a Split regex ledgerlm knows, by its exact text; false for any other.
bool hf_known_split_regex(const std::string& pattern, HfPreStep::CutRule* rule);

// Compiles `pattern` (PCRE2, UTF + UCP, JIT when available). Throws Error naming `where`.
std::shared_ptr<const HfRegex> hf_regex_compile(const std::string& pattern,
                                                const std::string& where);

// NFC of valid UTF-8 text (ASCII text, which NFC leaves as it is, is copied without a lookup).
std::string hf_nfc(std::string_view text);

// Appends the pre-tokenizer pieces of `text` (valid UTF-8, already normalized) to *pieces, in
// order; they are views into `text` and concatenate to it.
void hf_pretokenize(const HfPipeline& pipeline, std::string_view text,
                    std::vector<std::string_view>* pieces, std::vector<std::string_view>* scratch);

// Whether byte p (0 < p < text.size()) of raw text is a cut that keeps the pipeline's pieces (the
// rules above); reads at most 4 bytes on either side of p. False when no step splits the text.
bool hf_safe_cut(const HfPipeline& pipeline, std::string_view text, size_t p);

}  // namespace ledgerlm
