// The bpe tokenizer's training sample (data/bpe_sample.h): every train part whole while they fit
// the cap (the text training always used); over the cap, at most the cap, in whole lines taken
// from windows spread over all the train parts (never the val parts), the same every time; a
// line longer than a window cut at character boundaries; and through prepare, --bpe-sample-mb
// bounding what the tokenizer was trained on.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/bpe_sample.h"
#include "data/corpus.h"
#include "data/prepare.h"
#include "data/tokenizer.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

// Numbered lines, so that where a sampled line came from can be read off it.
std::string numbered_lines(const std::string& tag, int lines) {
  std::string text;
  for (int i = 0; i < lines; ++i) {
    auto r = rng_bits(static_cast<uint64_t>(i), RngStream::kSample, 0, 0);
    text += tag + " line " + std::to_string(i) + " " + std::string(r[0] % 60, 'x') + " 日本\n";
  }
  return text;
}

struct Corpus {
  testing::TempDir dir{"llm_sample_"};
  std::vector<std::string> paths, texts;
  void add(const std::string& name, const std::string& text) {
    paths.push_back(dir.file(name));
    texts.push_back(text);
    testing::write_file(paths.back(), text);
  }
  DocumentWalk walk(double val_fraction) const {
    return [this, val_fraction](const TrainPartVisitor& visit) {
      for (const std::string& p : paths) {
        const InputFile f(p, p);
        visit(f, corpus_split_point(f, val_fraction));
      }
    };
  }
};

TEST(BpeSample, UnderTheCapEveryTrainPartWhole) {
  Corpus c;
  c.add("a", numbered_lines("a", 300));
  c.add("b", numbered_lines("b", 200));
  c.add("empty", "");
  const BpeSample s = bpe_sample(c.walk(0.1), 1'000'000);
  EXPECT_TRUE(s.whole);
  ASSERT_EQ(s.parts.size(), 2u);  // the empty document has no train part
  for (size_t i = 0; i < 2; ++i) {
    const size_t cut = corpus_split_point(c.texts[i], 0.1);
    EXPECT_EQ(s.parts[i], c.texts[i].substr(0, cut));
  }
  EXPECT_EQ(s.train_bytes, s.parts[0].size() + s.parts[1].size());
}

TEST(BpeSample, OverTheCapWholeLinesSpreadOverTheTrainParts) {
  Corpus c;
  c.add("a", numbered_lines("a", 6000));
  c.add("b", numbered_lines("b", 6000));
  const uint64_t cap = 200'000;
  const BpeSample s = bpe_sample(c.walk(0.1), cap);
  EXPECT_FALSE(s.whole);
  EXPECT_LE(s.text.size(), cap);
  EXPECT_GT(s.text.size(), cap / 2);  // 3 windows of 64 KiB, less their trimmed line ends
  std::vector<std::string> train;
  for (const std::string& t : c.texts) train.push_back(t.substr(0, corpus_split_point(t, 0.1)));
  EXPECT_EQ(s.train_bytes, train[0].size() + train[1].size());
  // Window k of 3 starts at k * total / 3 of the train stream: some part starts within a line's
  // length after each.
  std::vector<uint64_t> starts;  // where each part begins in the stream
  for (std::string_view part : s.parts) {
    ASSERT_FALSE(part.empty());
    // Whole lines of one train part: found in it, at a line start, ending with a newline.
    size_t doc = 0, at = std::string::npos;
    for (; doc < 2 && at == std::string::npos; ++doc) at = train[doc].find(part);
    ASSERT_NE(at, std::string::npos) << "not from a train part: " << part.substr(0, 40);
    --doc;
    EXPECT_TRUE(at == 0 || train[doc][at - 1] == '\n') << part.substr(0, 40);
    EXPECT_EQ(part.back(), '\n');
    starts.push_back((doc == 0 ? 0 : train[0].size()) + at);
  }
  for (uint64_t k = 0; k < 3; ++k) {
    const uint64_t window = k * s.train_bytes / 3;
    bool found = false;
    for (uint64_t p : starts) found |= p >= window && p < window + 200;
    EXPECT_TRUE(found) << "no part starts just after window " << k << " at " << window;
  }
  // The same text every time.
  const BpeSample again = bpe_sample(c.walk(0.1), cap);
  EXPECT_EQ(again.text, s.text);
  EXPECT_EQ(again.parts.size(), s.parts.size());
}

TEST(BpeSample, ALineLongerThanAWindowIsCutAtCharacters) {
  Corpus c;
  std::string line;
  while (line.size() < 1'000'000) line += "日本語のテキスト";  // 3-byte characters, no newline
  c.add("line", line);
  const BpeSample s = bpe_sample(c.walk(0.0), 200'000);
  ASSERT_FALSE(s.whole);
  for (std::string_view part : s.parts) {
    EXPECT_TRUE(utf8_is_valid(part));
    EXPECT_EQ(line.find(part) % 3, 0u);
  }
  EXPECT_LE(s.text.size(), 200'000u);
}

TEST(BpeSample, InvalidUtf8InTheSampleNamesTheFile) {
  Corpus c;
  c.add("bad", "good text\nbad \xFF byte\n");
  const std::string msg = testing::error_of([&] { bpe_sample(c.walk(0.0), 1'000'000); });
  EXPECT_NE(msg.find(c.paths[0]), std::string::npos) << msg;
  EXPECT_NE(msg.find("offset 14"), std::string::npos) << msg;
}

// prepare trains the tokenizer on exactly this sample: the model is the one trained on it directly.
TEST(BpeSample, PrepareTrainsOnTheSample) {
  Corpus c;
  c.add("a", numbered_lines("a", 5000));
  c.add("b", numbered_lines("b", 5000));
  PrepareOptions opt;
  opt.inputs = {c.dir.file("a"), c.dir.file("b")};
  opt.out_dir = c.dir.file("out");
  opt.vocab_size = 300;
  opt.bpe_sample_bytes = 150'000;
  opt.quiet = true;
  data_prepare(opt);
  const BpeSample sample = bpe_sample(c.walk(0.1), 150'000);
  ASSERT_FALSE(sample.whole);
  tokenizer_train_bpe(sample.parts, 300, opt.seed)->save(c.dir.file(""));
  EXPECT_EQ(testing::read_file(c.dir.file("tokenizer.model")),
            testing::read_file(c.dir.file("out/tokenizer.model")));
}

}  // namespace
}  // namespace ledgerlm
