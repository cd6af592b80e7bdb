// `prepare --tokenizer hf:DIR` end to end: the tokenizer files copied into the data directory,
// meta.json (kind hf-bpe, the tokenizer's vocab and eot id), shards that are the documents'
// encodings each followed by the eot, the tokenizer's identity, a vocabulary past 65535 (4-byte
// shard tokens, eot id above 16 bits), and the refusals with nothing left on disk.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_check.h"
#include "data/prepare.h"
#include "data/sha256.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/base/check.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_of;

std::vector<int32_t> shard_ids(const std::string& path, int64_t vocab) {
  TokenArray t = shard_load(path, nullptr, vocab);
  std::vector<int32_t> ids(static_cast<size_t>(t.size()));
  if (t.size() > 0) t.copy(0, t.size(), ids.data());
  return ids;
}

// Two documents: GPT-2 sees text as pieces, so each holds contractions, numbers, space runs and
// non-ASCII text; lines make the val cut land at a line start.
std::vector<std::string> docs() {
  std::string a, b;
  for (int i = 0; i < 40; ++i) {
    a += "In the beginning, it's " + std::to_string(i * 37) + " days  and\tnights.\n";
    b += "caf\u00e9 \u65e5\u672c\u8a9e \U0001F642 they'll say \"" + std::to_string(i) + "\"\r\n";
  }
  return {a, b};
}

PrepareOptions options(const testing::TempDir& tmp, const std::string& tok_dir) {
  PrepareOptions opt;
  opt.inputs = {tmp.file("corpus")};
  opt.out_dir = tmp.file("out");
  opt.tokenizer = "hf:" + tok_dir;
  opt.val_fraction = 0.25;
  opt.quiet = true;
  return opt;
}

void write_corpus(const testing::TempDir& tmp) {
  fs::create_directories(tmp.file("corpus"));
  const auto d = docs();
  testing::write_file(tmp.file("corpus/a.txt"), d[0]);
  testing::write_file(tmp.file("corpus/b.txt"), d[1]);
}

TEST(PrepareHf, EndToEndFromTokenizerJson) {
  testing::TempDir tmp("llm_prephf_");
  write_corpus(tmp);
  testing::TempDir src("llm_prephf_src_");
  testing::write_file(src.file("tokenizer.json"), testing::hf_tokenizer_fixture("tokenizer.json"));
  PrepareSummary summary = data_prepare(options(tmp, src.file("")));

  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tmp.file("out")))
    files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"meta.json", "sources.jsonl", "tokenizer.json",
                                             "train.bin", "val.bin"}));
  EXPECT_EQ(testing::read_file(tmp.file("out/tokenizer.json")),
            testing::hf_tokenizer_fixture("tokenizer.json"));

  const json meta = json::parse(testing::read_file(tmp.file("out/meta.json")));
  EXPECT_EQ(meta["tokenizer"], "hf-bpe");
  EXPECT_EQ(meta["vocab_size"], 1001);
  EXPECT_EQ(meta["eot_id"], 1000);
  EXPECT_EQ(meta["token_width"], 2);

  // The data directory's own copy loads alone and is the same tokenizer.
  auto tok = tokenizer_load(tmp.file("out"));
  EXPECT_EQ(tok->name(), "hf-bpe");
  const DataCheck check = data_check(tmp.file("out"));
  EXPECT_EQ(check.tokenizer_id,
            "hf-bpe:" + sha256_hex(testing::hf_tokenizer_fixture("tokenizer.json")));

  // Shards: each document's train (val) part encoded, then one eot: the ids between two eots
  // are exactly the encoder's ids of their text, and the parts rejoin the documents.
  const auto d = docs();
  std::string rejoined[2];
  for (const char* shard : {"train.bin", "val.bin"}) {
    const std::vector<int32_t> ids = shard_ids(tmp.file(std::string("out/") + shard), 1001);
    size_t doc = 0, start = 0;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] != 1000) continue;
      ASSERT_LT(doc, 2u) << shard;
      const std::vector<int32_t> part(ids.begin() + start, ids.begin() + i);
      const std::string text = tok->decode(part);
      EXPECT_EQ(tok->encode(text), part) << shard << " document " << doc;
      rejoined[doc++] += text;
      start = i + 1;
    }
    EXPECT_EQ(doc, 2u) << shard;
    EXPECT_EQ(start, ids.size()) << shard << " ends with the eot";
    const char* split = shard == std::string("train.bin") ? "train" : "val";
    EXPECT_EQ(meta[split]["tokens"], ids.size());
  }
  EXPECT_EQ(rejoined[0], d[0]);
  EXPECT_EQ(rejoined[1], d[1]);
  EXPECT_EQ(summary.meta.train.documents, 2);

  // A replaced tokenizer.json (here only reformatted) is another tokenizer identity, so a run
  // trained on the data refuses it (train/run/run_dir.cpp compares the ids).
  testing::write_file(tmp.file("out/tokenizer.json"),
                      json::parse(testing::hf_tokenizer_fixture("tokenizer.json")).dump(1));
  EXPECT_NE(data_tokenizer_id(tmp.file("out"), summary.meta), check.tokenizer_id);
}

TEST(PrepareHf, FromVocabAndMerges) {
  testing::TempDir tmp("llm_prephf_");
  write_corpus(tmp);
  testing::TempDir src("llm_prephf_src_");
  testing::write_file(src.file("vocab.json"), testing::hf_tokenizer_fixture("vocab.json"));
  testing::write_file(src.file("merges.txt"), testing::hf_tokenizer_fixture("merges.txt"));
  PrepareOptions opt = options(tmp, src.file(""));
  opt.val_fraction = 0.0;
  data_prepare(opt);
  EXPECT_EQ(testing::read_file(tmp.file("out/vocab.json")),
            testing::hf_tokenizer_fixture("vocab.json"));
  EXPECT_EQ(testing::read_file(tmp.file("out/merges.txt")),
            testing::hf_tokenizer_fixture("merges.txt"));
  EXPECT_FALSE(fs::exists(tmp.file("out/tokenizer.json")));
  const std::string listing =
      sha256_hex(testing::hf_tokenizer_fixture("vocab.json")) + "  vocab.json\n" +
      sha256_hex(testing::hf_tokenizer_fixture("merges.txt")) + "  merges.txt\n";
  EXPECT_EQ(data_check(tmp.file("out")).tokenizer_id, "hf-bpe:" + sha256_hex(listing));
  // The same tokenizer as from tokenizer.json: the same shard.
  testing::TempDir tmp2("llm_prephf_");
  write_corpus(tmp2);
  PrepareOptions opt2 = options(tmp2, testing::hf_tokenizer_fixture_dir());
  opt2.val_fraction = 0.0;
  data_prepare(opt2);
  EXPECT_EQ(testing::read_file(tmp.file("out/train.bin")),
            testing::read_file(tmp2.file("out/train.bin")));
}

TEST(PrepareHf, LiteralEndOfTextInADocumentIsTheEot) {
  // As with the tokenizers library's defaults: the added token is matched in the text.
  testing::TempDir tmp("llm_prephf_");
  fs::create_directories(tmp.file("corpus"));
  testing::write_file(tmp.file("corpus/a.txt"), "one<|endoftext|>two");
  PrepareOptions opt = options(tmp, testing::hf_tokenizer_fixture_dir());
  opt.val_fraction = 0.0;
  data_prepare(opt);
  auto tok = tokenizer_load(tmp.file("out"));
  std::vector<int32_t> expected = tok->encode("one");
  expected.push_back(1000);
  for (int32_t id : tok->encode("two")) expected.push_back(id);
  expected.push_back(1000);
  EXPECT_EQ(shard_ids(tmp.file("out/train.bin"), 1001), expected);
}

TEST(PrepareHf, VocabularyPast16BitsUsesFourByteTokens) {
  // GPT-2's 50257 ids fit 2-byte tokens; a larger vocabulary (ids up to 70000 here, the eot
  // last as in GPT-2) must take 4 bytes per token and keep every id.
  json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  for (int id = 1000; id < 70000; ++id) j["model"]["vocab"]["zz" + std::to_string(id)] = id;
  j["added_tokens"][0]["id"] = 70000;
  testing::TempDir src("llm_prephf_src_");
  testing::write_file(src.file("tokenizer.json"), j.dump());
  testing::TempDir tmp("llm_prephf_");
  write_corpus(tmp);
  PrepareSummary summary = data_prepare(options(tmp, src.file("")));
  EXPECT_EQ(summary.meta.vocab_size, 70001);
  EXPECT_EQ(summary.meta.eot_id, 70000);
  EXPECT_EQ(summary.meta.token_width, 4);
  EXPECT_EQ(shard_read_header(tmp.file("out/train.bin")).width, 4u);
  const std::vector<int32_t> ids = shard_ids(tmp.file("out/train.bin"), 70001);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 70000), 2);
  EXPECT_EQ(data_check(tmp.file("out")).meta.eot_id, 70000);
}

TEST(PrepareHf, RefusesWithNothingLeftBehind) {
  testing::TempDir tmp("llm_prephf_");
  write_corpus(tmp);
  auto prepare_error = [&](const std::string& tokenizer) {
    PrepareOptions opt = options(tmp, "");
    opt.tokenizer = tokenizer;
    return error_of([&] { data_prepare(opt); });
  };
  EXPECT_NE(prepare_error("hf:").find("--tokenizer hf: is unknown (expected bpe, bytes, hf:DIR"),
            std::string::npos);
  EXPECT_NE(prepare_error("hf:" + tmp.file("nowhere"))
                .find("nowhere: has no tokenizer.json and no vocab.json + merges.txt"),
            std::string::npos);
  testing::TempDir src("llm_prephf_src_");
  json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  j["model"]["type"] = "Unigram";
  testing::write_file(src.file("tokenizer.json"), j.dump());
  EXPECT_NE(prepare_error("hf:" + src.file("")).find("key 'model.type' is \"Unigram\""),
            std::string::npos);
  testing::write_file(tmp.file("corpus/c.txt"), "bad \xFF byte");
  EXPECT_NE(prepare_error("hf:" + testing::hf_tokenizer_fixture_dir())
                .find("not valid UTF-8 text (bad byte at offset 4)"),
            std::string::npos);
  EXPECT_EQ(tmp.entries(), std::vector<std::string>{"corpus"});
}

}  // namespace
}  // namespace ledgerlm
