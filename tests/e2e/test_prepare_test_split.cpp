// The held-out test split through the binary (prepare --test-fraction, eval --split test):
//   - with the bytes tokenizer, train.bin, val.bin and test.bin hold each document's three parts
//     (data/corpus.h corpus_split_points), in document order, one eot after each non-empty part,
//     and together they are the whole document; meta.json counts them; the shards and meta.json
//     are byte-identical for --threads 1 and 2;
//   - the bpe tokenizer is trained on the train parts only: the same tokenizer as preparing a
//     corpus of just those parts with --val-fraction 0;
//   - eval --split test reads test.bin and gives another loss than val; the trainer does not read
//     test.bin's tokens (a damaged token block in it does not stop training, and eval --split test
//     names it); a data dir prepared without a test split gets one line naming the remedy;
//   - bad fractions (negative, 1, a sum of 1 or more) are refused in one line, with no output dir.
// About 2 s on 2 cores.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/corpus.h"
#include "data/shard.h"
#include "model/base/rng.h"
#include "tests/support/cli_test_support.h"
#include "tests/support/test_util.h"
#include "train/run/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // the command-line helpers (cli_test_support.h, test_util.h)

// `lines` lines of words (some multibyte), from `seed`.
std::string words_doc(uint64_t seed, int lines) {
  static const std::vector<std::string> words = {"the", "ledger", "naïve", "日本", "🙂",
                                                 "of",  "42",     "words", "and",  "x"};
  std::string text;
  for (int l = 0; l < lines; ++l) {
    const auto r = rng_bits(seed, RngStream::kSample, static_cast<uint64_t>(l), 0);
    const int n = 1 + static_cast<int>(r[0] % 10);
    for (int k = 0; k < n; ++k) {
      const auto w = rng_bits(seed, RngStream::kSample, static_cast<uint64_t>(l), k + 1u);
      text += (k ? " " : "") + words[w[0] % words.size()];
    }
    text += "\n";
  }
  return text;
}

std::vector<int32_t> shard_ids(const std::string& path) {
  TokenArray t = shard_load(path, nullptr);
  std::vector<int32_t> ids(static_cast<size_t>(t.size()));
  if (t.size() > 0) t.copy(0, t.size(), ids.data());
  return ids;
}

// A bytes-tokenizer shard as its parts: the byte strings between eots (id 256).
std::vector<std::string> shard_parts(const std::string& path) {
  std::vector<std::string> parts;
  std::string part;
  for (int32_t id : shard_ids(path)) {
    if (id == 256) {
      parts.push_back(part);
      part.clear();
    } else {
      part += static_cast<char>(id);
    }
  }
  EXPECT_TRUE(part.empty()) << path << ": tokens after the last eot";
  return parts;
}

std::string tiny_flags(const std::string& data, const std::string& out, const std::string& name) {
  return " --data.dir " + q(data) + " --train.out_dir " + q(out) + " --train.name " + q(name) +
         " --model.n_layer 1 --model.n_head 2 --model.n_embd 16 --model.block_size 16"
         " --train.seq_len 16 --train.micro_batch 2 --train.eval_windows 8"
         " --train.eval_interval 0 --train.log_interval 100 --train.threads 1"
         " --train.max_steps 3";
}

// The loss figure of `eval`'s "loss X nats/token" line; fails the test when absent.
double eval_loss(const CommandResult& r) {
  const size_t at = r.output.find("\nloss ");
  EXPECT_NE(at, std::string::npos) << r.output;
  return at == std::string::npos ? 0.0 : std::stod(r.output.substr(at + 6));
}

class PrepareTestSplit : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::make_temp_dir("prepare_test_split_");
    fs::create_directories(root_ + "/docs");
    // Documents of 1 to ~9 KB, one of 3 bytes (its 10% parts round to nothing) and one empty.
    for (int i = 0; i < 6; ++i)
      write_file(root_ + "/docs/d" + std::to_string(i) + ".txt", words_doc(20 + i, 40 + 60 * i));
    write_file(root_ + "/docs/e_tiny.txt", "ab\n");
    write_file(root_ + "/docs/f_empty.txt", "");
  }
  static void prepare(const std::string& input, const std::string& dir, const std::string& extra) {
    CommandResult r = ledgerlm("prepare --input " + q(input) + " --out " + q(dir) + " " + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  static std::string root_;
};
std::string PrepareTestSplit::root_;

TEST_F(PrepareTestSplit, ThreeSplitsPartitionEachDocumentInOrder) {
  const double val = 0.1, test = 0.15;
  const std::string flags = "--tokenizer bytes --val-fraction 0.1 --test-fraction 0.15";
  const std::string one = root_ + "/bytes_t1", two = root_ + "/bytes_t2";
  prepare(root_ + "/docs", one, flags + " --threads 1");
  prepare(root_ + "/docs", two, flags + " --threads 2 --chunk-bytes 300");
  for (const char* f : {"/train.bin", "/val.bin", "/test.bin", "/meta.json"})
    EXPECT_TRUE(read_file(one + f) == read_file(two + f)) << f << " differs with 2 threads";

  const std::vector<std::string> train = shard_parts(one + "/train.bin");
  const std::vector<std::string> valp = shard_parts(one + "/val.bin");
  const std::vector<std::string> testp = shard_parts(one + "/test.bin");
  size_t ti = 0, vi = 0, si = 0;
  int64_t bytes[3] = {0, 0, 0};
  for (const std::string& path : corpus_list_files({root_ + "/docs"})) {
    const std::string doc = read_file(path);
    const CorpusSplit cut = corpus_split_points(doc, val, test);
    const std::string parts[3] = {doc.substr(0, cut.val_begin),
                                  doc.substr(cut.val_begin, cut.test_begin - cut.val_begin),
                                  doc.substr(cut.test_begin)};
    // Every part of a document of some size is non-empty here; the tiny and the empty one are
    // all train (or nothing).
    if (doc.size() > 100) {
      for (const std::string& p : parts) EXPECT_FALSE(p.empty()) << path;
    }
    EXPECT_EQ(parts[0] + parts[1] + parts[2], doc);
    const std::vector<std::string>* shards[3] = {&train, &valp, &testp};
    size_t* next[3] = {&ti, &vi, &si};
    for (int s = 0; s < 3; ++s) {
      bytes[s] += static_cast<int64_t>(parts[s].size());
      if (parts[s].empty()) continue;
      ASSERT_LT(*next[s], shards[s]->size()) << path << ": missing from split " << s;
      EXPECT_EQ((*shards[s])[(*next[s])++], parts[s]) << path << ", split " << s;
    }
  }
  EXPECT_EQ(ti, train.size());
  EXPECT_EQ(vi, valp.size());
  EXPECT_EQ(si, testp.size());

  const nlohmann::json meta = nlohmann::json::parse(read_file(one + "/meta.json"));
  EXPECT_EQ(meta["test_fraction"].get<double>(), test);
  EXPECT_EQ(meta["val_fraction"].get<double>(), val);
  const char* names[3] = {"train", "val", "test"};
  const size_t counts[3] = {train.size(), valp.size(), testp.size()};
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(meta[names[s]]["bytes"].get<int64_t>(), bytes[s]) << names[s];
    EXPECT_EQ(meta[names[s]]["documents"].get<size_t>(), counts[s]) << names[s];
    // One token per byte, one eot per part.
    EXPECT_EQ(meta[names[s]]["tokens"].get<int64_t>(), bytes[s] + static_cast<int64_t>(counts[s]))
        << names[s];
  }
}

TEST_F(PrepareTestSplit, WithoutATestFractionNoTestFileOrKeys) {
  const std::string dir = root_ + "/no_test";
  prepare(root_ + "/docs", dir, "--tokenizer bytes --val-fraction 0.1 --test-fraction 0");
  EXPECT_FALSE(fs::exists(dir + "/test.bin"));
  const nlohmann::json meta = nlohmann::json::parse(read_file(dir + "/meta.json"));
  EXPECT_FALSE(meta.contains("test_fraction"));
  EXPECT_FALSE(meta.contains("test"));
}

TEST_F(PrepareTestSplit, BpeTokenizerTrainsOnTheTrainPartsOnly) {
  const std::string dir = root_ + "/bpe";
  prepare(root_ + "/docs", dir, "--vocab-size 300 --val-fraction 0.1 --test-fraction 0.2");
  // The same documents cut to their train parts, prepared without held-out text: the tokenizer
  // trains on exactly the same text, so it must be the same model file.
  fs::create_directories(root_ + "/train_parts");
  for (const std::string& path : corpus_list_files({root_ + "/docs"})) {
    const std::string doc = read_file(path);
    write_file(root_ + "/train_parts/" + fs::path(path).filename().string(),
               doc.substr(0, corpus_split_points(doc, 0.1, 0.2).val_begin));
  }
  const std::string ref = root_ + "/bpe_train_parts";
  prepare(root_ + "/train_parts", ref, "--vocab-size 300 --val-fraction 0");
  EXPECT_TRUE(read_file(dir + "/tokenizer.model") == read_file(ref + "/tokenizer.model"))
      << "the tokenizer saw held-out text";
  EXPECT_TRUE(read_file(dir + "/train.bin") == read_file(ref + "/train.bin"));
}

TEST_F(PrepareTestSplit, EvalOnTheTestSplit) {
  const std::string data = root_ + "/eval_data", runs = root_ + "/runs";
  prepare(root_ + "/docs", data, "--tokenizer bytes --val-fraction 0.2 --test-fraction 0.2");
  // A damaged token (not header) block in test.bin: the trainer never reads it.
  std::string shard = read_file(data + "/test.bin");
  const std::string good = shard;
  // The low byte of token 10 (after the 32-byte header), a text byte of the first document's test
  // part (more than 10 bytes long): still a byte's id, so only the block checksum can catch it.
  const size_t at = 32 + 2 * 10;
  shard[at] = static_cast<char>(shard[at] ^ 0x01);
  ASSERT_TRUE(write_file(data + "/test.bin", shard));
  CommandResult r = ledgerlm("train" + tiny_flags(data, runs, "r"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_one_line_error("eval --run " + q(runs + "/r") + " --split test --threads 1",
                        {data + "/test.bin", "fails its CRC-32C checksum"});
  ASSERT_TRUE(write_file(data + "/test.bin", good));

  const CommandResult val = ledgerlm("eval --run " + q(runs + "/r") + " --split val --threads 1");
  const CommandResult test = ledgerlm("eval --run " + q(runs + "/r") + " --split test --threads 1");
  ASSERT_EQ(val.exit_code, 0) << val.output;
  ASSERT_EQ(test.exit_code, 0) << test.output;
  EXPECT_NE(test.output.find(data + "/test.bin"), std::string::npos) << test.output;
  EXPECT_NE(val.output.find(data + "/val.bin"), std::string::npos) << val.output;
  // Other text, so another mean loss (the figures are printed to 6 decimals).
  EXPECT_NE(eval_loss(val), eval_loss(test)) << val.output << test.output;

  // A data dir prepared without a test split.
  const std::string old_data = root_ + "/old_data";
  prepare(root_ + "/docs", old_data, "--tokenizer bytes --val-fraction 0.2");
  r = ledgerlm("train" + tiny_flags(old_data, runs, "old"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_one_line_error("eval --run " + q(runs + "/old") + " --split test",
                        {old_data, "has no test split (prepare it with --test-fraction)"});
  expect_one_line_error("eval --run " + q(runs + "/old") + " --split tset",
                        {"--split", "val, train or test", "tset"});
}

TEST_F(PrepareTestSplit, BadFractionsAreRefused) {
  const std::string out = root_ + "/refused";
  const std::string base = "prepare --input " + q(root_ + "/docs") + " --out " + q(out) + " ";
  expect_one_line_error(base + "--test-fraction -0.1", {"--test-fraction -0.1", "[0, 1)"});
  expect_one_line_error(base + "--test-fraction 1", {"--test-fraction 1", "[0, 1)"});
  expect_one_line_error(base + "--val-fraction 0.5 --test-fraction 0.5",
                        {"--val-fraction 0.5", "--test-fraction 0.5", "below 1"});
  expect_one_line_error(base + "--val-fraction 0.6 --test-fraction 0.45",
                        {"--val-fraction 0.6", "--test-fraction 0.45", "below 1"});
  expect_one_line_error(base + "--val-fraction -0.2 --test-fraction 0.1",
                        {"--val-fraction -0.2", "[0, 1)"});
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(root_))
    EXPECT_EQ(e.path().filename().string().find("refused.tmp"), std::string::npos) << e.path();
}

}  // namespace
}  // namespace ledgerlm
