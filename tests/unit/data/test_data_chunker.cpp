// The cut points of prepare's parallel encoding (data/chunker.h):
//   - every place a tokenizer calls a safe cut (Tokenizer::safe_cut) is one: encoding the two
//     sides separately gives the ids of encoding the whole, checked on random texts made of the
//     fragments that matter (space runs, tabs, newlines, CRLF, U+00A0 and U+3000 white space, CJK,
//     emoji, contractions, digits, a literal U+2581, <|endoftext|> and an added token with a
//     space in it) for bytes, a trained bpe model and the hf-bpe fixture;
//   - a bpe line longer than the encoder's run limit gets sentencepiece's ids for the whole line;
//   - chunk_end picks the same hard cuts, and so the same ids, for every chunk size; a text with
//     no safe cut gets one hard cut per MiB, at a character boundary; a text with line breaks
//     gets none and its ids are those of encoding it whole.
// Takes about 1 s.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>
#include <nlohmann/json.hpp>

#include "data/chunker.h"
#include "data/tokenizer.h"
#include "model/base/rng.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

// The hf-bpe fixture with one more added token, "x y", whose text holds a space.
std::unique_ptr<Tokenizer> hf_with_spaced_added_token(const testing::TempDir& dir) {
  nlohmann::json j = nlohmann::json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  nlohmann::json added = j["added_tokens"][0];
  added["id"] = 1001;
  added["content"] = "x y";
  j["added_tokens"].push_back(added);
  testing::write_file(dir.file("tokenizer.json"), j.dump());
  return tokenizer_load_hf(dir.file(""));
}

const std::vector<std::string> kFragments = {"a",
                                             "the",
                                             "word",
                                             " ",
                                             "  ",
                                             "   ",
                                             "\t",
                                             "\n",
                                             "\n\n",
                                             "\r\n",
                                             "日本",
                                             "🙂",
                                             "é",
                                             "'s",
                                             "'ll",
                                             "42",
                                             "!",
                                             "?!",
                                             ".",
                                             "x y",
                                             "x",
                                             " y",
                                             "\xC2\xA0",
                                             "\xE3\x80\x80",
                                             "\xE2\x96\x81",
                                             "<|endoftext|>",
                                             "<|endo",
                                             "oftext|>",
                                             "\xE2\x80\xA8"};

std::string random_text(uint64_t seed, int fragments) {
  std::string text;
  for (int i = 0; i < fragments; ++i) {
    auto r = rng_bits(seed, RngStream::kSample, static_cast<uint64_t>(i), 0);
    text += kFragments[r[0] % kFragments.size()];
  }
  return text;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every safe cut of `texts` (at most `per_text` of them, spread over each text) splits it without
// changing its ids. Returns how many cuts were checked.
int check_safe_cuts(const Tokenizer& tok, const std::vector<std::string>& texts, int per_text) {
  int checked = 0;
  for (const std::string& text : texts) {
    std::vector<size_t> safe;
    for (size_t p = 1; p < text.size(); ++p)
      if (tok.safe_cut(text, p)) safe.push_back(p);
    const std::vector<int32_t> whole = tok.encode(text);
    const size_t step = std::max<size_t>(1, safe.size() / static_cast<size_t>(per_text));
    for (size_t k = 0; k < safe.size(); k += step) {
      const size_t p = safe[k];
      const std::string_view v(text);
      EXPECT_EQ(concat(tok.encode(v.substr(0, p)), tok.encode(v.substr(p))), whole)
          << tok.name() << ": cut at " << p << " of \"" << text << "\" changes the ids";
      ++checked;
    }
  }
  return checked;
}

std::vector<std::string> random_texts(int count, int fragments) {
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) out.push_back(random_text(100 + i, fragments));
  return out;
}

TEST(SafeCut, HfBpeCutsNeverChangeTheIds) {
  testing::TempDir dir("llm_chunker_");
  const auto tok = hf_with_spaced_added_token(dir);
  EXPECT_GT(check_safe_cuts(*tok, random_texts(80, 150), 40), 2000);
  // The rules themselves: white space after a non-white-space character.
  EXPECT_TRUE(tok->safe_cut("a b", 1));
  EXPECT_TRUE(tok->safe_cut("a\nb", 1));
  EXPECT_FALSE(tok->safe_cut("a b", 2));             // inside " b"
  EXPECT_FALSE(tok->safe_cut("a  b", 2));            // between two spaces
  EXPECT_FALSE(tok->safe_cut("\xC2\xA0 b", 2));      // after U+00A0, white space
  EXPECT_FALSE(tok->safe_cut("\xE3\x80\x80 b", 3));  // after U+3000
  EXPECT_TRUE(tok->safe_cut("\xE6\x97\xA5 b", 3));   // after 日
  EXPECT_FALSE(tok->safe_cut("ax yb", 2));           // inside the added token "x y"
  EXPECT_TRUE(tok->safe_cut("a yb", 1));
}

TEST(SafeCut, BpeCutsNeverChangeTheIds) {
  std::string training;
  for (int i = 0; i < 40; ++i) training += random_text(7 + i, 300) + "\n";
  const auto tok = tokenizer_train_bpe({training}, 400, 1);
  EXPECT_GT(check_safe_cuts(*tok, random_texts(25, 150), 30), 500);
  EXPECT_TRUE(tok->safe_cut("a b", 1));
  EXPECT_FALSE(tok->safe_cut("a  b", 2));
  EXPECT_FALSE(tok->safe_cut("a\tb", 1));  // a tab is not sentencepiece's word boundary
  EXPECT_TRUE(tok->safe_cut("a\tb\nc", 3));
  EXPECT_TRUE(tok->safe_cut("a\tb\nc", 4));

  // A line longer than the encoder's run limit (8 KiB) is encoded in runs cut at safe cuts: the
  // ids are those sentencepiece gives the whole line in one call.
  std::string line;
  for (int i = 0; line.size() < 40000; ++i) line += random_text(300 + i, 20);
  // One line (no "\n"), without a literal U+2581 (this tokenizer's own business).
  std::string clean;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line.compare(i, 3, "\xE2\x96\x81") == 0) {
      clean += 'a';
      i += 2;
    } else {
      clean += line[i] == '\n' ? ' ' : line[i];
    }
  }
  testing::TempDir dir("llm_chunker_");
  tok->save(dir.file(""));
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(dir.file("tokenizer.model")).ok());
  std::vector<int> whole;
  ASSERT_TRUE(sp.Encode(clean, &whole).ok());
  EXPECT_EQ(tok->encode(clean), std::vector<int32_t>(whole.begin(), whole.end()));
}

TEST(SafeCut, BytesCutAnywhere) {
  const auto tok = tokenizer_make_bytes();
  EXPECT_GT(check_safe_cuts(*tok, random_texts(5, 100), 1000), 300);
}

// Chunk ends over a whole part in memory, for a chunk size.
std::vector<uint64_t> chunk_ends(const Tokenizer& tok, std::string_view part, uint64_t chunk) {
  std::vector<uint64_t> ends;
  const PartWindow window{part, 0, true};
  for (uint64_t p = 0; p < part.size();) {
    p = chunk_end(tok, window, p, chunk);
    ends.push_back(p);
  }
  return ends;
}

// The ids of encoding each chunk on its own.
std::vector<int32_t> chunked_ids(const Tokenizer& tok, std::string_view part,
                                 const std::vector<uint64_t>& ends) {
  std::vector<int32_t> ids;
  uint64_t p = 0;
  for (uint64_t e : ends) {
    const std::vector<int32_t> chunk = tok.encode(part.substr(p, e - p));
    ids.insert(ids.end(), chunk.begin(), chunk.end());
    p = e;
  }
  return ids;
}

// The ends that are not safe cuts: the hard cuts.
std::set<uint64_t> hard_cuts(const Tokenizer& tok, std::string_view part,
                             const std::vector<uint64_t>& ends) {
  std::set<uint64_t> out;
  for (uint64_t e : ends)
    if (e < part.size() && !tok.safe_cut(part, e)) out.insert(e);
  return out;
}

TEST(ChunkEnd, SameCutsAndIdsForEveryChunkSize) {
  testing::TempDir dir("llm_chunker_");
  const auto hf = hf_with_spaced_added_token(dir);
  const auto bytes = tokenizer_make_bytes();
  // No white space at all: 2.2 MiB of letters, CJK, digits and punctuation (GPT-2 pieces of a
  // few bytes each, but no safe cut).
  std::string solid;
  for (int i = 0; solid.size() < (9u << 18); ++i)
    solid += "abcdefgh\xE6\x97\xA5\xE6\x9C\xAC" + std::to_string(i % 1000) + ".,";
  // One line of words, 1.2 MiB, and the same with a 1.1 MiB run without white space inside.
  std::string line;
  for (int i = 0; line.size() < (5u << 18); ++i) line += random_text(900 + i % 50, 12) + " ";
  for (char& c : line)
    if (c == '\n') c = ' ';
  // (cut after a space of `line`; 1.1 MiB of `solid`, ending before one of its "a")
  const size_t run_start = line.rfind(' ', 100000) + 1;
  std::string mixed = line.substr(0, run_start) + solid.substr(0, solid.find('a', 9u << 17)) +
                      line.substr(run_start);
  for (const Tokenizer* tok : {hf.get(), bytes.get()}) {
    for (const std::string* text : {&solid, &line, &mixed}) {
      SCOPED_TRACE(tok->name() + ", text of " + std::to_string(text->size()) + " bytes");
      const std::vector<uint64_t> ref = chunk_ends(*tok, *text, kDefaultChunkBytes);
      const std::set<uint64_t> hard = hard_cuts(*tok, *text, ref);
      const std::vector<int32_t> ids = chunked_ids(*tok, *text, ref);
      for (uint64_t chunk : {uint64_t{4096}, uint64_t{300001}, uint64_t{5} << 19}) {
        const std::vector<uint64_t> ends = chunk_ends(*tok, *text, chunk);
        EXPECT_EQ(hard_cuts(*tok, *text, ends), hard) << "chunk " << chunk;
        for (size_t i = 0; i < ends.size(); ++i) {
          const uint64_t len = ends[i] - (i ? ends[i - 1] : 0);
          EXPECT_LE(len, std::max(chunk, kHardCutBytes)) << "chunk " << chunk;
        }
        EXPECT_EQ(chunked_ids(*tok, *text, ends), ids) << "chunk " << chunk;
      }
      if (tok == bytes.get()) {
        EXPECT_TRUE(hard.empty());
      } else if (text == &line) {
        EXPECT_TRUE(hard.empty());
        EXPECT_EQ(ids, tok->encode(*text));  // no hard cut: the ids of the whole text
      } else if (text == &solid) {
        // One hard cut per MiB from the start, each moved back to the start of a character.
        ASSERT_EQ(hard.size(), 2u);
        uint64_t expect = 0;
        for (uint64_t h : hard) {
          expect += kHardCutBytes;
          EXPECT_LE(h, expect);
          EXPECT_GE(h + 3, expect);
          EXPECT_NE(static_cast<unsigned char>((*text)[h]) & 0xC0, 0x80) << "cut at " << h;
          expect = h;
        }
      } else {
        // The run without white space starts at run_start: one hard cut, 1 MiB after the last
        // safe cut before it (there are none after it within the MiB; it starts at a letter).
        uint64_t last_safe = run_start;
        while (!tok->safe_cut(*text, last_safe)) --last_safe;
        ASSERT_EQ(hard.size(), 1u);
        EXPECT_EQ(*hard.begin(), last_safe + kHardCutBytes);
      }
    }
  }
}

}  // namespace
}  // namespace ledgerlm
