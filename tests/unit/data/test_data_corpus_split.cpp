// The per-document train/val/test split points (data/corpus.h corpus_split_points): test is the
// last test_fraction of a document's bytes, val the val_fraction just before it, each cut moved to
// a close line start or else to a UTF-8 character start; a test_fraction of 0 gives the val cut of
// corpus_split_point exactly (so directories prepared without a test split do not change). Tiny
// and empty documents, zero fractions, and the file form agreeing with the text form. Milliseconds.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/corpus.h"
#include "model/base/rng.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

// 10 lines of 10 bytes.
std::string ten_lines() {
  std::string text;
  for (int i = 0; i < 10; ++i) text += "line " + std::to_string(i) + "...\n";
  return text;
}

void expect_split(std::string_view text, double val, double test, uint64_t val_begin,
                  uint64_t test_begin) {
  const CorpusSplit s = corpus_split_points(text, val, test);
  EXPECT_EQ(s.val_begin, val_begin) << "val " << val << " test " << test << " of " << text.size();
  EXPECT_EQ(s.test_begin, test_begin) << "val " << val << " test " << test << " of " << text.size();
}

TEST(CorpusSplitTest, ZeroTestFractionIsTheValSplitOfBefore) {
  const std::string text = ten_lines();
  ASSERT_EQ(text.size(), 100u);
  // The cuts tests/unit/data/test_data_shard.cpp pins for corpus_split_point, with no test part.
  expect_split(text, 0.1, 0.0, 90, 100);
  expect_split(text, 0.13, 0.0, 90, 100);
  expect_split(text, 0.25, 0.0, 70, 100);
  expect_split(text, 0.0, 0.0, 100, 100);
  expect_split(text, 0.001, 0.0, 100, 100);
  for (double val : {0.0, 0.05, 0.1, 0.13, 0.25, 0.5, 0.9})
    EXPECT_EQ(corpus_split_points(text, val, 0.0).val_begin, corpus_split_point(text, val));
}

TEST(CorpusSplitTest, TestIsTheEndValJustBeforeIt) {
  const std::string text = ten_lines();
  // Both fractions of the document's 100 bytes: test the last line, val the one before.
  expect_split(text, 0.1, 0.1, 80, 90);
  // test 0.13: exact cut 87, the line start 90 is within 13/4 bytes. val 0.2 = 20 bytes before
  // 90: exact cut 70, a line start.
  expect_split(text, 0.2, 0.13, 70, 90);
  // val 0.17 = 17 bytes before 80: exact cut 63, line start 60 within 4 bytes.
  expect_split(text, 0.17, 0.2, 60, 80);
  // A zero val fraction: val is empty, train runs up to test.
  expect_split(text, 0.0, 0.3, 70, 70);
  // A test part that rounds to zero bytes is empty; val is then the document's end as before.
  expect_split(text, 0.1, 0.001, 90, 100);
}

TEST(CorpusSplitTest, FallsBackToCharacterBoundaries) {
  std::string text;
  for (int i = 0; i < 50; ++i) text += "日";  // 3 bytes each, no line breaks
  // test 0.1 = 15 bytes: cut 135, a character start. val 0.11 = round(16.5) = 17 bytes before
  // it: cut 118, inside a character -> 117.
  expect_split(text, 0.11, 0.1, 117, 135);
  // test 0.11 = 17 bytes: cut 133 -> 132; val 0.1 = 15 bytes before: cut 117, a start.
  expect_split(text, 0.1, 0.11, 117, 132);
}

TEST(CorpusSplitTest, ALineStartBeyondTheTestCutIsNotUsedForVal) {
  // val's exact cut lies just before test's start, and the only line start close to it is
  // test's own: val must end at test_begin, never begin after it.
  const std::string text = std::string(80, 'a') + "\n" + std::string(19, 'b');  // 100 bytes
  // test 0.19: cut 81, the line start. val 0.01 = 1 byte before 81: cut 80, the '\n'; the line
  // start after it (81) is val's end, not inside val, so val cuts at 80, a character start.
  expect_split(text, 0.01, 0.19, 80, 81);
}

TEST(CorpusSplitTest, TinyAndEmptyDocuments) {
  expect_split("", 0.1, 0.1, 0, 0);
  // 1 byte: 0.1 of it rounds to no bytes, for both parts.
  expect_split("a", 0.1, 0.1, 1, 1);
  // 5 bytes: 0.5 byte rounds to 1 for each part.
  expect_split("abcde", 0.1, 0.1, 3, 4);
  // test wants everything (round(1.8) = 2 of 2 bytes): val and train are empty.
  expect_split("ab", 0.05, 0.9, 0, 0);
  // 2 bytes, test 1 byte (round(1.2)): it begins at the line start 1. val 1 byte (round(0.6))
  // before it: the only line start, 1, is val's end, so val begins at 0 and train is empty.
  expect_split("\nb", 0.3, 0.6, 0, 1);
  // A multibyte character alone: no part can cut inside it.
  expect_split("日", 0.34, 0.34, 0, 0);
}

// Random texts of lines, multibyte characters and runs without line breaks: the three parts are
// in order and begin at character starts, and the file form reads the same cuts.
TEST(CorpusSplitTest, PartsInOrderOnCharacterStartsAndTheFileFormAgrees) {
  const std::vector<std::string> pieces = {"a", "bc ", "日本", "\n", "🙂", "\n\n", "xyz"};
  const std::string dir = testing::make_temp_dir("corpus_split_");
  for (uint64_t seed = 0; seed < 60; ++seed) {
    std::string text;
    const auto len = rng_bits(seed, RngStream::kSample, 0, 0);
    const int n = static_cast<int>(len[0] % 200);
    for (int i = 0; i < n; ++i) {
      const auto r = rng_bits(seed, RngStream::kSample, 1, static_cast<uint64_t>(i));
      text += pieces[r[0] % pieces.size()];
    }
    const std::string path = dir + "/doc" + std::to_string(seed);
    testing::write_file(path, text);
    const InputFile file(path, path);
    for (double val : {0.0, 0.07, 0.1, 0.3})
      for (double test : {0.0, 0.05, 0.1, 0.4}) {
        const CorpusSplit s = corpus_split_points(text, val, test);
        ASSERT_LE(s.val_begin, s.test_begin);
        ASSERT_LE(s.test_begin, text.size());
        for (uint64_t p : {s.val_begin, s.test_begin}) {
          if (p < text.size()) {
            EXPECT_NE(static_cast<unsigned char>(text[p]) & 0xC0, 0x80)
                << "cut " << p << " inside a character, seed " << seed;
          }
        }
        const CorpusSplit f = corpus_split_points(file, val, test);
        EXPECT_EQ(f.val_begin, s.val_begin) << "seed " << seed;
        EXPECT_EQ(f.test_begin, s.test_begin) << "seed " << seed;
        if (test == 0.0) {
          EXPECT_EQ(s.test_begin, text.size());
        }
      }
  }
}

}  // namespace
}  // namespace ledgerlm
