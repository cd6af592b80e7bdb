// `prepare` end to end on small temp corpora: meta.json fields, shards that decode back to the
// documents with val = a suffix of each, the directory/stdin inputs, and the refusals (existing
// --out untouched, empty or missing corpus, invalid UTF-8) leaving no partial output behind.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/prepare.h"
#include "data/sha256.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

// Each test's own temp directory, removed at the end of the test.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("llm_prep_") {}
};

// A document of `lines` lines of pseudo-random words, with tabs, space runs and UTF-8.
std::string make_doc(uint64_t id, int lines) {
  const std::vector<std::string> words = {"in",    "the",  "beginning", "was",   "word",     "and",
                                          "naïve", "日本", "🙂",      "light", "darkness", "–"};
  std::string text;
  for (int l = 0; l < lines; ++l) {
    auto r = rng_bits(id, RngStream::kSample, static_cast<uint64_t>(l), 0);
    int n = 2 + static_cast<int>(r[0] % 8);
    for (int k = 0; k < n; ++k) {
      auto w = rng_bits(id, RngStream::kSample, static_cast<uint64_t>(l), k + 1u);
      if (k > 0) text += (w[0] % 9 == 0) ? "\t" : (w[0] % 7 == 0 ? "   " : " ");
      text += words[w[1] % words.size()];
    }
    text += (r[1] % 10 == 0) ? "\n\n" : "\n";
  }
  return text;
}

// Splits decoded shard text at the end-of-text markers (one after each document part).
std::vector<std::string> split_parts(const std::string& decoded) {
  std::vector<std::string> parts;
  size_t pos = 0, at;
  const std::string eot = kEotText;
  while ((at = decoded.find(eot, pos)) != std::string::npos) {
    parts.push_back(decoded.substr(pos, at - pos));
    pos = at + eot.size();
  }
  EXPECT_EQ(pos, decoded.size()) << "shard does not end with eot";
  return parts;
}

std::string decode_shard(const Tokenizer& tok, const std::string& path) {
  TokenArray t = shard_load(path, nullptr, tok.vocab_size());
  std::vector<int32_t> ids(static_cast<size_t>(t.size()));
  if (t.size() > 0) t.copy(0, t.size(), ids.data());
  return tok.decode(ids);
}

// DIR/sources.jsonl, one object per line.
std::vector<nlohmann::json> read_sources(const std::string& dir) {
  std::istringstream in(testing::read_file(dir + "/sources.jsonl"));
  std::vector<nlohmann::json> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// Each use checks the message for a needle, so a call that throws nothing fails there too.
using testing::error_of;

TEST(Prepare, BpeEndToEndOnADirectory) {
  TempDir tmp;
  fs::create_directories(tmp.file("corpus/sub"));
  const std::vector<std::pair<std::string, std::string>> docs = {
      {tmp.file("corpus/a.txt"), make_doc(1, 300)},
      {tmp.file("corpus/b.txt"), make_doc(2, 150)},
      {tmp.file("corpus/sub/c.txt"), make_doc(3, 200) + "no final newline"},
  };
  for (const auto& [path, text] : docs) testing::write_file(path, text);
  testing::write_file(tmp.file("corpus/.hidden"), "must not be read");

  PrepareOptions opt;
  opt.inputs = {tmp.file("corpus")};
  opt.out_dir = tmp.file("out");
  opt.vocab_size = 400;
  opt.val_fraction = 0.1;
  opt.quiet = true;
  PrepareSummary summary = data_prepare(opt);
  EXPECT_EQ(summary.out_dir, tmp.file("out"));
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"corpus", "out"}));  // no temp dir left

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tmp.file("out")))
    files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"meta.json", "sources.jsonl", "tokenizer.model",
                                             "train.bin", "val.bin"}));

  // meta.json, read as plain JSON (the documented format), not through meta_read.
  nlohmann::json meta = nlohmann::json::parse(testing::read_file(tmp.file("out/meta.json")));
  auto tok = tokenizer_load(tmp.file("out"));
  EXPECT_EQ(meta["format_version"], 2);
  EXPECT_EQ(meta["tokenizer"], "bpe");
  EXPECT_EQ(meta["vocab_size"], tok->vocab_size());
  EXPECT_LE(tok->vocab_size(), 400);
  EXPECT_EQ(meta["eot_id"], tok->eot_id());
  EXPECT_EQ(meta["token_width"], 2);
  EXPECT_EQ(meta["val_fraction"], 0.1);
  // The sources: counted in meta.json, listed in sources.jsonl (sorted by path, recursive,
  // hidden file skipped), one JSON object per line.
  const std::vector<nlohmann::json> sources = read_sources(tmp.file("out"));
  ASSERT_EQ(sources.size(), 3u);
  int64_t total_bytes = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(sources[i]["path"], docs[i].first);
    EXPECT_EQ(sources[i]["bytes"], docs[i].second.size());
    EXPECT_EQ(sources[i]["sha256"], sha256_hex(docs[i].second));
    total_bytes += static_cast<int64_t>(docs[i].second.size());
  }
  EXPECT_EQ(meta["sources"]["files"], 3);
  EXPECT_EQ(meta["sources"]["bytes"], total_bytes);
  EXPECT_EQ(meta["sources"]["list"], "sources.jsonl");

  // Shards decode to the documents: train part + val part == document, val a suffix (and thus
  // never seen in training), about 10% of each document, cut at a line start.
  std::vector<std::string> train = split_parts(decode_shard(*tok, tmp.file("out/train.bin")));
  std::vector<std::string> val = split_parts(decode_shard(*tok, tmp.file("out/val.bin")));
  ASSERT_EQ(train.size(), docs.size());
  ASSERT_EQ(val.size(), docs.size());
  int64_t train_bytes = 0, val_bytes = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(train[i] + val[i], docs[i].second) << "document " << i;
    double frac = static_cast<double>(val[i].size()) / static_cast<double>(docs[i].second.size());
    EXPECT_NEAR(frac, 0.1, 0.03) << "document " << i;  // a line is < 3% of a document here
    EXPECT_EQ(train[i].back(), '\n') << "document " << i << " not cut at a line start";
    train_bytes += static_cast<int64_t>(train[i].size());
    val_bytes += static_cast<int64_t>(val[i].size());
  }
  EXPECT_EQ(meta["train"]["bytes"], train_bytes);
  EXPECT_EQ(meta["val"]["bytes"], val_bytes);
  EXPECT_EQ(train_bytes + val_bytes, total_bytes);
  EXPECT_EQ(meta["train"]["documents"], 3);
  EXPECT_EQ(meta["train"]["tokens"], shard_read_header(tmp.file("out/train.bin")).count);
  EXPECT_EQ(meta["val"]["tokens"], shard_read_header(tmp.file("out/val.bin")).count);
  EXPECT_EQ(summary.meta.train.tokens, meta["train"]["tokens"]);

  // The same inputs and seed give byte-identical output.
  opt.out_dir = tmp.file("out2");
  data_prepare(opt);
  for (const char* f : {"train.bin", "val.bin", "tokenizer.model"}) {
    EXPECT_EQ(testing::read_file(tmp.file(std::string("out/") + f)),
              testing::read_file(tmp.file(std::string("out2/") + f)))
        << f;
  }
}

TEST(Prepare, BytesFromStdin) {
  TempDir tmp;
  std::string text = make_doc(5, 50);
  std::istringstream in(text);
  PrepareOptions opt;
  opt.inputs = {"-"};
  opt.out_dir = tmp.file("out/");  // trailing slash names the same directory
  opt.tokenizer = "bytes";
  opt.quiet = true;
  opt.stdin_stream = &in;
  data_prepare(opt);
  DataMeta meta = meta_read(tmp.file("out"));
  EXPECT_EQ(meta.tokenizer, "bytes");
  EXPECT_EQ(meta.vocab_size, 257);
  EXPECT_EQ(meta.eot_id, 256);
  EXPECT_EQ(meta.sources.files, 1);
  EXPECT_EQ(meta.sources.bytes, static_cast<int64_t>(text.size()));
  const std::vector<nlohmann::json> sources = read_sources(tmp.file("out"));
  ASSERT_EQ(sources.size(), 1u);
  EXPECT_EQ(sources[0]["path"], "-");
  EXPECT_EQ(sources[0]["sha256"], sha256_hex(text));
  // The copy of standard input is gone.
  for (const auto& e : fs::directory_iterator(tmp.file("out")))
    EXPECT_NE(e.path().filename(), ".stdin");
  // Bytes: one token per byte plus one eot per split.
  EXPECT_EQ(meta.train.tokens, meta.train.bytes + 1);
  EXPECT_EQ(meta.val.tokens, meta.val.bytes + 1);
  EXPECT_FALSE(fs::exists(tmp.file("out/tokenizer.model")));
  auto tok = tokenizer_load(tmp.file("out"));
  EXPECT_EQ(
      decode_shard(*tok, tmp.file("out/train.bin")) + decode_shard(*tok, tmp.file("out/val.bin")),
      text.substr(0, meta.train.bytes) + kEotText + text.substr(meta.train.bytes) + kEotText);
}

TEST(Prepare, RefusesExistingOutAndLeavesItUntouched) {
  TempDir tmp;
  testing::write_file(tmp.file("in.txt"), make_doc(1, 50));
  fs::create_directories(tmp.file("out"));
  testing::write_file(tmp.file("out/precious.txt"), "keep me");
  PrepareOptions opt;
  opt.inputs = {tmp.file("in.txt")};
  opt.out_dir = tmp.file("out");
  opt.tokenizer = "bytes";
  opt.quiet = true;
  std::string msg = error_of([&] { data_prepare(opt); });
  EXPECT_NE(msg.find("already exists"), std::string::npos) << msg;
  EXPECT_NE(msg.find(tmp.file("out")), std::string::npos) << msg;
  std::vector<std::string> out_files;
  for (const auto& e : fs::directory_iterator(tmp.file("out")))
    out_files.push_back(e.path().filename());
  EXPECT_EQ(out_files, std::vector<std::string>{"precious.txt"});
  EXPECT_EQ(testing::read_file(tmp.file("out/precious.txt")), "keep me");
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"in.txt", "out"}));
  // An existing empty directory (or a file) is refused too.
  fs::create_directories(tmp.file("empty"));
  opt.out_dir = tmp.file("empty");
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("already exists"), std::string::npos);
  opt.out_dir = tmp.file("in.txt");
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("already exists"), std::string::npos);
}

// A new user's `--out data_out/mine` in a fresh checkout: the missing parents are made.
TEST(Prepare, CreatesMissingParentsOfOut) {
  TempDir tmp;
  testing::write_file(tmp.file("in.txt"), make_doc(1, 50));
  PrepareOptions opt;
  opt.inputs = {tmp.file("in.txt")};
  opt.out_dir = tmp.file("data_out/deeper/mine");
  opt.tokenizer = "bytes";
  opt.quiet = true;
  data_prepare(opt);
  EXPECT_TRUE(fs::is_regular_file(tmp.file("data_out/deeper/mine/meta.json")));
  // The existing --out is still refused, now that its parents exist.
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("already exists"), std::string::npos);
  // A parent that is a file is refused with its name, and nothing is made.
  opt.out_dir = tmp.file("in.txt/sub/mine");
  const std::string msg = error_of([&] { data_prepare(opt); });
  EXPECT_NE(msg.find("in.txt is not a directory"), std::string::npos) << msg;
  EXPECT_EQ(tmp.entries(), (std::vector<std::string>{"data_out", "in.txt"}));
}

TEST(Prepare, RefusesBadInputsWithoutPartialOutput) {
  TempDir tmp;
  PrepareOptions opt;
  opt.out_dir = tmp.file("out");
  opt.quiet = true;

  testing::write_file(tmp.file("empty.txt"), "");
  opt.inputs = {tmp.file("empty.txt")};
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("empty"), std::string::npos);

  fs::create_directories(tmp.file("emptydir"));
  opt.inputs = {tmp.file("emptydir")};
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("empty"), std::string::npos);

  opt.inputs = {tmp.file("nonexistent.txt")};
  std::string msg = error_of([&] { data_prepare(opt); });
  EXPECT_NE(msg.find(tmp.file("nonexistent.txt")), std::string::npos) << msg;

  testing::write_file(tmp.file("latin1.txt"), "caf\xE9 au lait\n");
  opt.inputs = {tmp.file("latin1.txt")};
  msg = error_of([&] { data_prepare(opt); });
  EXPECT_NE(msg.find("latin1.txt"), std::string::npos) << msg;
  EXPECT_NE(msg.find("UTF-8"), std::string::npos) << msg;

  testing::write_file(tmp.file("ok.txt"), "hello\n");
  opt.inputs = {tmp.file("ok.txt")};
  opt.val_fraction = 1.0;
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("--val-fraction"), std::string::npos);
  opt.val_fraction = 0.1;
  opt.tokenizer = "wordpiece";
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("--tokenizer"), std::string::npos);
  opt.tokenizer = "bpe";
  opt.vocab_size = 10;
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("--vocab-size"), std::string::npos);
  // A failure with missing parents of --out removes the parents it made.
  opt.out_dir = tmp.file("no/such/parent");
  opt.vocab_size = 300;
  opt.inputs = {tmp.file("empty.txt")};
  EXPECT_NE(error_of([&] { data_prepare(opt); }).find("empty"), std::string::npos);

  // None of the failures left anything next to the inputs.
  EXPECT_EQ(tmp.entries(),
            (std::vector<std::string>{"empty.txt", "emptydir", "latin1.txt", "ok.txt"}));
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// --tokenizer from:DIR: a second corpus tokenized with the first one's trained tokenizer (same
// file, same ids as encoding with it directly), for bpe and for bytes; a directory that is not
// prepared data is refused with nothing left behind.
TEST(Prepare, ReusesAPreparedDirectorysTokenizer) {
  TempDir tmp;
  testing::write_file(tmp.file("a.txt"), make_doc(11, 300));
  const std::string second = make_doc(12, 120);
  testing::write_file(tmp.file("b.txt"), second);
  for (const char* kind : {"bpe", "bytes"}) {
    SCOPED_TRACE(kind);
    const std::string base = tmp.file(std::string("base_") + kind);
    const std::string reuse = tmp.file(std::string("reuse_") + kind);
    PrepareOptions a;
    a.inputs = {tmp.file("a.txt")};
    a.out_dir = base;
    a.tokenizer = kind;
    a.vocab_size = 400;
    a.quiet = true;
    data_prepare(a);
    PrepareOptions b = a;
    b.inputs = {tmp.file("b.txt")};
    b.out_dir = reuse;
    b.tokenizer = "from:" + base;
    b.val_fraction = 0.0;
    const PrepareSummary s = data_prepare(b);
    EXPECT_EQ(s.meta.tokenizer, kind);
    if (std::string(kind) == "bpe") {
      EXPECT_EQ(testing::read_file(base + "/tokenizer.model"),
                testing::read_file(reuse + "/tokenizer.model"));
    }
    const auto tok = tokenizer_load(base);
    std::vector<int32_t> want = tok->encode(second);
    want.push_back(tok->eot_id());
    TokenArray got = shard_load(reuse + "/train.bin", nullptr, tok->vocab_size());
    std::vector<int32_t> ids(static_cast<size_t>(got.size()));
    if (got.size() > 0) got.copy(0, got.size(), ids.data());
    EXPECT_EQ(ids, want);
  }
  PrepareOptions bad;
  bad.inputs = {tmp.file("b.txt")};
  bad.out_dir = tmp.file("bad");
  bad.tokenizer = "from:" + tmp.file("a.txt");
  bad.quiet = true;
  EXPECT_THROW(data_prepare(bad), Error);
  EXPECT_FALSE(fs::exists(tmp.file("bad")));
}

}  // namespace
}  // namespace ledgerlm
