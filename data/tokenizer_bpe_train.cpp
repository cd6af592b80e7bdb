// Training the BPE tokenizer with sentencepiece 0.1.97 through its library API, on any UTF-8
// text, and the smallest vocabulary a corpus allows.
//
// Exact round trips need several non-default settings: identity normalization (no NFKC), no
// whitespace collapsing, no dummy prefix, byte fallback for characters outside the learned
// vocabulary, and "\n" as a user-defined symbol so newlines survive as tokens. Three more details
// are handled here rather than by sentencepiece:
//  - lines longer than kMaxTrainLine bytes are split before training, because the trainer silently
//    drops sentences over 4192 bytes;
//  - the space marker U+2581 must be a piece, or a space becomes its three byte tokens, which
//    decode to a literal U+2581: text whose training part has few or no ASCII spaces (CJK, one
//    word per line, a 2-byte file) failed to round-trip. It is a required character, and when the
//    training text holds no space at all one line of a single space is fed as well (sentencepiece
//    aborts on a required character it never saw);
//  - a vocabulary smaller than the corpus's alphabet needs is refused before training, in our
//    words (tokenizer_bpe_min_vocab mirrors how sentencepiece picks the alphabet).
#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include <sentencepiece_trainer.h>

#include "data/tokenizer.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

constexpr size_t kMaxTrainLine = 4000;
constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581, sentencepiece's space
// sentencepiece skips training sentences holding U+2585, which it reserves for unknown chars.
constexpr std::string_view kReservedUnk = "\xE2\x96\x85";
constexpr float kCharacterCoverage = 0.9999f;
constexpr int64_t kReservedIds = 259;  // unk, eot, "\n", 256 byte pieces

// Feeds the training texts to sentencepiece one line at a time (each with its "\n"), long lines
// cut at a character boundary, and a single " " at the end if no line it kept had a space.
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::vector<std::string_view>& texts) : texts_(texts) { advance(); }
  bool done() const override { return done_; }
  void Next() override { advance(); }
  const std::string& value() const override { return value_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  void advance() {
    while (doc_ < texts_.size() && pos_ >= texts_[doc_].size()) {
      ++doc_;
      pos_ = 0;
    }
    if (doc_ >= texts_.size()) {
      done_ = saw_space_;
      value_.assign(1, ' ');
      saw_space_ = true;  // the one extra line
      return;
    }
    std::string_view text = texts_[doc_];
    size_t nl = text.find('\n', pos_);
    size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
    if (end - pos_ > kMaxTrainLine) {
      // Cut a long line at a UTF-8 character boundary (never before a continuation byte).
      end = pos_ + kMaxTrainLine;
      while (end > pos_ + 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    }
    value_.assign(text.substr(pos_, end - pos_));
    pos_ = end;
    if (value_.find(' ') != std::string::npos && value_.find(kReservedUnk) == std::string::npos)
      saw_space_ = true;
  }

  const std::vector<std::string_view>& texts_;
  size_t doc_ = 0;
  size_t pos_ = 0;
  std::string value_;
  bool done_ = false;
  bool saw_space_ = false;
};

// sentencepiece's meta pieces, which it blanks out of training sentences before counting.
std::vector<std::string> meta_pieces() {
  std::vector<std::string> out = {"<unk>", kEotText, "\n"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    out.push_back(name);
  }
  return out;
}

// Code point at s[i] (valid UTF-8) and its length.
uint32_t next_code_point(std::string_view s, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  *len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  uint32_t cp = *len == 1 ? c : c & (0x7F >> *len);
  for (size_t k = 1; k < *len && i + k < s.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Adds one training line's characters to `counts` as sentencepiece sees them: spaces as U+2581,
// every meta piece (longest match first) as one tab, which counts for coverage but never joins the
// alphabet.
void count_line(const std::string& line, const std::vector<std::string>& metas,
                std::unordered_map<uint32_t, int64_t>* counts, int64_t* all) {
  size_t i = 0;
  while (i < line.size()) {
    size_t match = 0;
    if (line[i] == '<' || line[i] == '\n')
      for (const std::string& m : metas)
        if (m.size() > match && line.compare(i, m.size(), m) == 0) match = m.size();
    size_t len = match;
    uint32_t cp = '\t';
    if (match == 0) cp = next_code_point(line, i, &len);
    if (cp == ' ') cp = 0x2581;
    if (cp != 0) {  // sentencepiece skips NUL
      ++(*counts)[cp];
      ++*all;
    }
    i += len;
  }
}

}  // namespace

BpeVocabFloor tokenizer_bpe_min_vocab(const std::vector<std::string_view>& texts) {
  const std::vector<std::string> metas = meta_pieces();
  std::unordered_map<uint32_t, int64_t> counts;
  int64_t all = 0;
  for (LineIterator lines(texts); !lines.done(); lines.Next()) {
    const std::string& line = lines.value();
    if (line.empty() || line.size() > 4192 || line.find(kReservedUnk) != std::string::npos)
      continue;
    count_line(line, metas, &counts, &all);
  }
  // Required characters (the space marker) first, then by frequency; the most frequent ones
  // until 99.99% of the characters are covered (the test is sentencepiece's, in float).
  std::vector<std::pair<std::pair<bool, int64_t>, uint32_t>> order;
  for (const auto& [cp, n] : counts) order.push_back({{cp == 0x2581, n}, cp});
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  BpeVocabFloor floor;
  floor.reserved = kReservedIds;
  int64_t covered = 0;
  for (const auto& [key, cp] : order) {
    const float coverage = static_cast<float>(1.0 * static_cast<double>(covered) /
                                              static_cast<double>(std::max<int64_t>(all, 1)));
    if (coverage >= kCharacterCoverage) break;
    covered += key.second;
    if (cp != '\t') ++floor.alphabet;
  }
  return floor;
}

std::unique_ptr<Tokenizer> tokenizer_train_bpe(const std::vector<std::string_view>& texts,
                                               int64_t vocab_size, uint64_t seed) {
  LLM_REQUIRE(vocab_size >= kReservedIds + 1 && vocab_size <= (int64_t{1} << 30), "--vocab-size ",
              vocab_size, " is out of range for bpe (expected ", kReservedIds + 1,
              " .. 2^30; 259 ids are reserved for unk, eot, newline and the 256 byte tokens)");
  size_t total = 0;
  for (auto t : texts) total += t.size();
  LLM_REQUIRE(total > 0, "bpe tokenizer: no training text");
  const BpeVocabFloor floor = tokenizer_bpe_min_vocab(texts);
  const std::string too_small = error_message(
      "--vocab-size ", vocab_size, " is too small for this corpus: the smallest is ",
      floor.smallest(), " = ", floor.reserved,
      " reserved ids (unk, eot, newline, 256 byte tokens) + ", floor.alphabet,
      " characters that make up 99.99% of its training text (rarer ones become byte tokens)");
  LLM_REQUIRE(vocab_size >= floor.smallest(), too_small);

  std::unordered_map<std::string, std::string> kwargs = {
      {"model_type", "bpe"},
      {"vocab_size", std::to_string(vocab_size)},
      // Soft limit: a small corpus may not have enough pairs to reach vocab_size.
      {"hard_vocab_limit", "false"},
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"allow_whitespace_only_pieces", "true"},
      {"split_digits", "false"},
      {"byte_fallback", "true"},
      {"character_coverage", "0.9999"},
      {"required_chars", std::string(kSpaceMarker)},
      {"user_defined_symbols", "\n"},
      {"control_symbols", kEotText},
      {"unk_id", "0"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"pad_id", "-1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"num_threads", "1"},
      {"minloglevel", "2"},
  };
  sentencepiece::SetRandomGeneratorSeed(static_cast<unsigned>(seed ^ (seed >> 32)));
  LineIterator lines(texts);
  std::string proto;
  auto st = sentencepiece::SentencePieceTrainer::Train(kwargs, &lines, &proto);
  // Our floor mirrors sentencepiece's; should they ever disagree, still answer in our words.
  LLM_REQUIRE(st.ok() || st.ToString().find("Vocabulary size is smaller") == std::string::npos,
              too_small);
  LLM_REQUIRE(st.ok(), "bpe tokenizer training failed: ", st.ToString());
  return tokenizer_bpe_from_proto(std::move(proto), "trained bpe model");
}

}  // namespace ledgerlm
