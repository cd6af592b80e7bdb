// Tokenizers: exact round trips (newlines, runs of spaces, tabs, empty lines, UTF-8, the
// sentencepiece space marker U+2581) for the bpe and bytes tokenizers, save/load, determinism,
// eot handling and the errors for bad input.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

// A temp directory removed when the test ends.
class TempDir {
 public:
  TempDir() {
    char templ[] = "/tmp/llm_tok_XXXXXX";
    path_ = ::mkdtemp(templ);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A small deterministic corpus (~40 KB) with the features round trips must survive. Small on
// purpose: training a 400-piece BPE on it takes well under a second.
std::string make_corpus() {
  const std::vector<std::string> words = {
      "the",  "and", "of", "LORD", "said", "unto", "him", "naïve", "café",    "日本語",
      "🙂", "–",   "x",  "1",    "22",   "333",  "a,b", "end.",  "(paren)", "\"quoted\""};
  const std::vector<std::string> seps = {" ", " ", " ", "  ", "\t", " \t ", "    "};
  std::string text;
  for (uint64_t line = 0; line < 800; ++line) {
    auto r = rng_bits(7, RngStream::kSample, line, 0);
    if (r[0] % 11 == 0) {  // empty lines, sometimes several
      text += std::string(1 + r[1] % 3, '\n');
      continue;
    }
    int n = 3 + static_cast<int>(r[1] % 9);
    for (int k = 0; k < n; ++k) {
      auto w = rng_bits(7, RngStream::kSample, line, k + 1);
      if (k > 0) text += seps[w[0] % seps.size()];
      text += words[w[1] % words.size()];
    }
    if (r[2] % 7 == 0) text += "   ";  // trailing spaces
    text += "\n";
  }
  return text;
}

const std::vector<std::string>& probes() {
  static const std::vector<std::string> p = {
      "",
      "\n",
      "\n\n\n",
      " ",
      "     ",
      "\t",
      "\t\t  \t",
      "a  b   c    d",
      "  leading and trailing  ",
      "line one\n\nline three\n",
      "\n\n  indented\n\t\ttabbed\n",
      "naïve – 日本語 🙂",
      "unseen: Ωμέγα ℵ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ﬁ (NFKC would change this)",
      "\xE2\x96\x81 literal space marker\xE2\x96\x81\xE2\x96\x81x",
      "windows\r\nline\r\n",
      "<|endoftext|> as plain text",
      std::string("nul\0inside", 10),
      std::string(5000, 'z') + "\n" + std::string(3000, ' '),
  };
  return p;
}

void expect_round_trips(const Tokenizer& tok) {
  for (const auto& text : probes()) {
    std::vector<int32_t> ids = tok.encode(text);
    for (int32_t id : ids) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, tok.vocab_size());
      ASSERT_NE(id, tok.eot_id()) << "encode produced eot for text: " << text;
    }
    EXPECT_EQ(tok.decode(ids), text) << tok.name() << " round trip failed";
  }
}

class BpeTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    corpus_ = new std::string(make_corpus());
    tok_ = tokenizer_train_bpe({*corpus_}, 400, 1).release();
  }
  static void TearDownTestSuite() {
    delete tok_;
    delete corpus_;
  }
  static std::string* corpus_;
  static Tokenizer* tok_;
};
std::string* BpeTokenizerTest::corpus_ = nullptr;
Tokenizer* BpeTokenizerTest::tok_ = nullptr;

TEST_F(BpeTokenizerTest, RoundTripsExactly) {
  EXPECT_EQ(tok_->name(), "bpe");
  EXPECT_LE(tok_->vocab_size(), 400);
  // 259 reserved ids (unk, eot, "\n", 256 bytes), ~45 characters, plus learned merges.
  EXPECT_GT(tok_->vocab_size(), 350);
  expect_round_trips(*tok_);
  EXPECT_EQ(tok_->decode(tok_->encode(*corpus_)), *corpus_);
}

TEST_F(BpeTokenizerTest, CompressesTrainingText) {
  // BPE must learn merges: on its own training text (20 distinct words) a 400-piece vocab
  // covers most words whole, so well under half a token per byte (bytes would give one).
  std::vector<int32_t> ids = tok_->encode(*corpus_);
  EXPECT_LT(ids.size() * 2, corpus_->size())
      << ids.size() << " tokens for " << corpus_->size() << " bytes";
}

TEST_F(BpeTokenizerTest, NewlineIsOneTokenAndEotDecodesAsMarker) {
  std::vector<int32_t> nl = tok_->encode("\n");
  ASSERT_EQ(nl.size(), 1u);
  std::vector<int32_t> ids = tok_->encode("ab");
  ids.push_back(tok_->eot_id());
  std::vector<int32_t> more = tok_->encode("cd");
  ids.insert(ids.end(), more.begin(), more.end());
  EXPECT_EQ(tok_->decode(ids), std::string("ab") + kEotText + "cd");
}

TEST_F(BpeTokenizerTest, SaveLoadGivesSameIds) {
  TempDir tmp;
  const std::string& dir = tmp.path();
  tok_->save(dir);
  auto loaded = tokenizer_load_bpe(dir + "/tokenizer.model");
  EXPECT_EQ(loaded->vocab_size(), tok_->vocab_size());
  EXPECT_EQ(loaded->eot_id(), tok_->eot_id());
  for (const auto& text : probes()) EXPECT_EQ(loaded->encode(text), tok_->encode(text));
}

TEST_F(BpeTokenizerTest, TrainingIsDeterministic) {
  auto again = tokenizer_train_bpe({*corpus_}, 400, 1);
  TempDir d1, d2;
  tok_->save(d1.path());
  again->save(d2.path());
  EXPECT_EQ(testing::read_file(d1.path() + "/tokenizer.model"),
            testing::read_file(d2.path() + "/tokenizer.model"));
}

TEST_F(BpeTokenizerTest, RejectsBadInput) {
  EXPECT_THROW(tok_->encode("bad \xC3 utf8"), Error);
  EXPECT_THROW(tok_->decode(std::vector<int32_t>{static_cast<int32_t>(tok_->vocab_size())}), Error);
  EXPECT_THROW(tok_->decode(std::vector<int32_t>{-1}), Error);
}

TEST(BpeTokenizer, LongLinesAreNotDroppedFromTraining) {
  // One 20 KB line: sentencepiece drops sentences over 4192 bytes, so unless we split it the
  // trainer sees nothing and learns no merges.
  std::string line;
  for (int i = 0; i < 2000; ++i) line += "abcabc ";
  auto tok = tokenizer_train_bpe({line}, 280, 1);
  EXPECT_GT(tok->vocab_size(), 259);
  std::vector<int32_t> ids = tok->encode(line);
  EXPECT_LT(ids.size() * 3, line.size());
  EXPECT_EQ(tok->decode(ids), line);
}

TEST(BpeTokenizer, RejectsTooSmallVocabAndCorruptModel) {
  EXPECT_THROW(tokenizer_train_bpe({std::string("some text")}, 100, 1), Error);
  TempDir tmp;
  testing::write_file(tmp.path() + "/tokenizer.model", "not a model");
  try {
    tokenizer_load_bpe(tmp.path() + "/tokenizer.model");
    FAIL() << "corrupt model accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.model"), std::string::npos) << e.what();
  }
}

TEST(BytesTokenizer, RoundTripsAndIds) {
  auto tok = tokenizer_make_bytes();
  EXPECT_EQ(tok->vocab_size(), 257);
  EXPECT_EQ(tok->eot_id(), 256);
  EXPECT_EQ(tok->name(), "bytes");
  expect_round_trips(*tok);
  EXPECT_EQ(tok->encode("A\n\xFF"), (std::vector<int32_t>{65, 10, 255}));
  // Bytes accepts any byte sequence, valid UTF-8 or not.
  std::string binary;
  for (int b = 0; b < 256; ++b) binary.push_back(static_cast<char>(b));
  EXPECT_EQ(tok->decode(tok->encode(binary)), binary);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{104, 256, 105}), std::string("h") + kEotText + "i");
  EXPECT_THROW(tok->decode(std::vector<int32_t>{257}), Error);
}

TEST(Utf8, Validation) {
  size_t bad = 0;
  EXPECT_TRUE(utf8_is_valid("naïve – 日本語 🙂"));
  EXPECT_FALSE(utf8_is_valid("ab\xC3", &bad));
  EXPECT_EQ(bad, 2u);
  EXPECT_FALSE(utf8_is_valid("\xC0\x80"));          // overlong NUL
  EXPECT_FALSE(utf8_is_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8_is_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(utf8_is_valid("x\x80y", &bad));
  EXPECT_EQ(bad, 1u);
}

}  // namespace
}  // namespace ledgerlm
