// Hugging Face tokenizers in the SmolLM2, Qwen2 and Llama-3 styles (digit splitting, NFC, their
// split regexes, a BOS template, ignore_merges, special tokens written in the text): the ids equal
// those of the tokenizers library on the committed fixtures
// (tests/reference/gen_hf_family_tokenizer_fixtures.py made them once; no Python runs here), for
// every case and for a whole document prepared at 1, 2 and 3 threads with small chunks; the
// pre-tokenizer's pieces equal the library's; the BOS before each document and the eot written
// once after a template that ends with it; every cut point the chunker may choose keeps the ids
// and the pieces, on the fixtures' text and on random text of the characters the rules turn on;
// pieces of hundreds of kB encode.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/hf_bpe_files.h"
#include "data/hf_pretokenize.h"
#include "data/prepare.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/base/check.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using nlohmann::json;

const char* const kFamilies[] = {"smollm2", "qwen2", "llama3"};

json expected(const std::string& family) {
  return json::parse(testing::read_file(testing::hf_family_fixture_dir(family) + "/expected.json"));
}

// Writes `tokenizer_json` as DIR/tokenizer.json, making DIR.
void fs_write_dir(const std::string& dir, const std::string& tokenizer_json) {
  std::filesystem::create_directories(dir);
  testing::write_file(dir + "/tokenizer.json", tokenizer_json);
}

std::vector<int32_t> with_post_processor(const Tokenizer& tok, std::vector<int32_t> ids) {
  std::vector<int32_t> out = tok.doc_prefix();
  out.insert(out.end(), ids.begin(), ids.end());
  const std::vector<int32_t> suffix = tok.doc_suffix();
  out.insert(out.end(), suffix.begin(), suffix.end());
  return out;
}

// Where two id lists first differ, for a readable failure.
std::string first_difference(const std::vector<int32_t>& got, const std::vector<int32_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "ids differ at index " + std::to_string(i) + " (got " + std::to_string(got.size()) +
         " ids, expected " + std::to_string(want.size()) + ")";
}

TEST(HfTokenizerFamilies, IdsEqualTheLibrarysOnHardText) {
  for (const char* family : kFamilies) {
    auto tok = tokenizer_load_hf(testing::hf_family_fixture_dir(family));
    const json e = expected(family);
    EXPECT_EQ(tok->vocab_size(), e.at("vocab_size").get<int64_t>()) << family;
    EXPECT_EQ(tok->eot_id(), e.at("eot_id").get<int32_t>()) << family;
    ASSERT_GT(e.at("cases").size(), 20u);
    for (const json& c : e.at("cases")) {
      const std::string text = c.at("text");
      const std::vector<int32_t> want = c.at("ids");
      const std::vector<int32_t> got = with_post_processor(*tok, tok->encode(text));
      EXPECT_TRUE(got == want) << family << ", case " << c.at("name").get<std::string>() << ": "
                               << first_difference(got, want);
    }
  }
}

// ledgerlm's pre-tokenizer pieces of `text` (NFC first where the tokenizer has it), as byte-level
// strings, as the library's pre_tokenize_str writes them.
std::vector<std::string> pieces(const HfPipeline& pipeline, const std::string& text) {
  const std::string normalized = pipeline.nfc ? hf_nfc(text) : text;
  std::vector<std::string_view> views, scratch;
  hf_pretokenize(pipeline, normalized, &views, &scratch);
  std::vector<std::string> out;
  for (std::string_view v : views) out.push_back(byte_level_encode(v));
  return out;
}

// `sample` continues a prompt from the ids the library gives the text with its template's prefix
// (Llama-3's BOS) and no suffix; an empty prompt starts after the end-of-text without a prefix.
TEST(HfTokenizerFamilies, PromptIdsAreTheLibrarysWithThePrefix) {
  for (const char* family : kFamilies) {
    SCOPED_TRACE(family);
    auto tok = tokenizer_load_hf(testing::hf_family_fixture_dir(family));
    const json e = expected(family);
    for (const json& c : e["cases"]) {
      if (c["text"].get<std::string>().empty()) continue;  // sampling needs an id: below
      SCOPED_TRACE(c["name"].get<std::string>());
      std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
      want.resize(want.size() - tok->doc_suffix().size());
      const std::vector<int32_t> got = tokenizer_prompt_ids(*tok, c["text"].get<std::string>());
      EXPECT_EQ(got, want) << first_difference(got, want);
    }
    const std::vector<int32_t> empty = tokenizer_prompt_ids(*tok, "");
    EXPECT_EQ(empty,
              tok->doc_prefix().empty() ? std::vector<int32_t>{tok->eot_id()} : tok->doc_prefix());
  }
  EXPECT_EQ(tokenizer_prompt_ids(*tokenizer_make_bytes(), "ab"), (std::vector<int32_t>{97, 98}));
}

TEST(HfTokenizerFamilies, PiecesEqualTheLibrarysPreTokenizer) {
  for (const char* family : kFamilies) {
    const HfPipeline pipeline = hf_bpe_read(testing::hf_family_fixture_dir(family)).pipeline;
    const json e = expected(family);
    int checked = 0;
    for (const json& c : e.at("cases")) {
      if (!c.contains("pieces")) continue;
      ++checked;
      EXPECT_EQ(pieces(pipeline, c.at("text")), c.at("pieces").get<std::vector<std::string>>())
          << family << ", case " << c.at("name").get<std::string>();
    }
    EXPECT_GT(checked, 20) << family;
  }
}

TEST(HfTokenizerFamilies, PostProcessorsAndEndOfText) {
  // Llama-3 puts its BOS before every text and ends documents with <|end_of_text|>; SmolLM2 and
  // Qwen2 add nothing and end them with <|endoftext|> (id 0 in SmolLM2).
  auto llama = tokenizer_load_hf(testing::hf_family_fixture_dir("llama3"));
  EXPECT_EQ(llama->doc_prefix(), (std::vector<int32_t>{600}));
  EXPECT_TRUE(llama->doc_suffix().empty());
  EXPECT_EQ(llama->decode(std::vector<int32_t>{llama->eot_id()}), "<|end_of_text|>");
  auto smol = tokenizer_load_hf(testing::hf_family_fixture_dir("smollm2"));
  EXPECT_TRUE(smol->doc_prefix().empty() && smol->doc_suffix().empty());
  EXPECT_EQ(smol->eot_id(), 0);
  auto qwen = tokenizer_load_hf(testing::hf_family_fixture_dir("qwen2"));
  EXPECT_TRUE(qwen->doc_prefix().empty() && qwen->doc_suffix().empty());
  EXPECT_EQ(qwen->decode(std::vector<int32_t>{qwen->eot_id()}), "<|endoftext|>");
}

// The fixture's "document" case prepared as one file: train.bin must be the library's ids of it
// (BOS included for Llama-3) and the eot, whatever the threads; chunks of 40 bytes make every
// safe cut a chunk end.
TEST(HfTokenizerFamilies, PrepareGivesTheLibrarysIdsAtEveryThreadCount) {
  for (const char* family : kFamilies) {
    const json e = expected(family);
    std::string text;
    std::vector<int32_t> want;
    for (const json& c : e.at("cases")) {
      if (c.at("name") != "document") continue;
      text = c.at("text");
      want = c.at("ids").get<std::vector<int32_t>>();
    }
    ASSERT_GT(text.size(), 2000u) << family;
    want.push_back(e.at("eot_id").get<int32_t>());
    for (int threads : {1, 2, 3}) {
      testing::TempDir tmp("llm_hffam_");
      testing::write_file(tmp.file("doc.txt"), text);
      PrepareOptions opt;
      opt.inputs = {tmp.file("doc.txt")};
      opt.out_dir = tmp.file("out");
      opt.tokenizer = "hf:" + testing::hf_family_fixture_dir(family);
      opt.val_fraction = 0.0;
      opt.threads = threads;
      opt.chunk_bytes = 40;
      opt.quiet = true;
      data_prepare(opt);
      TokenArray t = shard_load(tmp.file("out/train.bin"), nullptr, e.at("vocab_size"));
      std::vector<int32_t> got(static_cast<size_t>(t.size()));
      if (t.size() > 0) t.copy(0, t.size(), got.data());
      EXPECT_TRUE(got == want) << family << ", " << threads
                               << " threads: " << first_difference(got, want);
      EXPECT_EQ(tokenizer_load(tmp.file("out"))->doc_prefix(),
                tokenizer_load_hf(testing::hf_family_fixture_dir(family))->doc_prefix());
    }
  }
}

// A template that already ends each text with the eot ("<|begin_of_text|> $A <|end_of_text|>")
// ends each document part with it once, not twice.
TEST(HfTokenizerFamilies, PrepareWritesTheEotOnceAfterATemplateThatEndsWithIt) {
  json j =
      json::parse(testing::read_file(testing::hf_family_fixture_dir("llama3") + "/tokenizer.json"));
  json& tpl = j["post_processor"]["processors"][1];
  tpl["single"].push_back({{"SpecialToken", {{"id", "<|end_of_text|>"}, {"type_id", 0}}}});
  testing::TempDir tmp("llm_hffam_eos_");
  fs_write_dir(tmp.file("tok"), j.dump());
  testing::write_file(tmp.file("doc.txt"), "In the beginning\n");
  PrepareOptions opt;
  opt.inputs = {tmp.file("doc.txt")};
  opt.out_dir = tmp.file("out");
  opt.tokenizer = "hf:" + tmp.file("tok");
  opt.val_fraction = 0.0;
  opt.threads = 1;
  opt.quiet = true;
  data_prepare(opt);
  auto tok = tokenizer_load(tmp.file("out"));
  EXPECT_EQ(tok->doc_suffix(), (std::vector<int32_t>{tok->eot_id()}));
  std::vector<int32_t> want = {600};  // <|begin_of_text|>
  for (int32_t id : tok->encode("In the beginning\n")) want.push_back(id);
  want.push_back(tok->eot_id());
  TokenArray t = shard_load(tmp.file("out/train.bin"), nullptr, tok->vocab_size());
  std::vector<int32_t> got(static_cast<size_t>(t.size()));
  if (t.size() > 0) t.copy(0, t.size(), got.data());
  EXPECT_EQ(got, want);
}

// encode(text) == encode(text[0, p)) + encode(text[p, end)) at every p safe_cut accepts, and
// the same of the pre-tokenizer's pieces (ids alone would miss a wrong split that a small
// vocabulary encodes the same).
void expect_cuts_keep_ids(const Tokenizer& tok, const HfPipeline& pipeline, const std::string& text,
                          const std::string& what, int* cuts) {
  const std::vector<int32_t> whole = tok.encode(text);
  const std::vector<std::string> whole_pieces = pieces(pipeline, text);
  for (size_t p = 1; p < text.size(); ++p) {
    if (!tok.safe_cut(text, p)) continue;
    ++*cuts;
    std::vector<std::string> split_pieces = pieces(pipeline, text.substr(0, p));
    for (std::string& piece : pieces(pipeline, text.substr(p)))
      split_pieces.push_back(std::move(piece));
    if (split_pieces != whole_pieces) {
      ADD_FAILURE() << what << ": a cut at byte " << p << " changes the pre-tokenizer's pieces";
      return;
    }
    std::vector<int32_t> parts = tok.encode(std::string_view(text).substr(0, p));
    const std::vector<int32_t> right = tok.encode(std::string_view(text).substr(p));
    parts.insert(parts.end(), right.begin(), right.end());
    if (parts != whole) {
      ADD_FAILURE() << what << ": a cut at byte " << p << " changes the ids";
      return;
    }
  }
}

TEST(HfTokenizerFamilies, SafeCutsKeepTheIds) {
  // Random text of the characters the cut rules and the regexes turn on: white space of every
  // kind, \r\n, digits, letters, symbols, combining marks (NFC), and special tokens.
  const std::vector<std::string> alphabet = {" ",
                                             " ",
                                             " ",
                                             "\t",
                                             "\n",
                                             "\n",
                                             "\r",
                                             "\u00a0",
                                             "\u3000",
                                             "\u2028",
                                             "\u0085",
                                             "\u180e",
                                             "a",
                                             "Z",
                                             "s",
                                             "'",
                                             "e",
                                             "\u0301",
                                             "\u0308",
                                             "\u212b",
                                             "\u1100",
                                             "\u1161",
                                             "\u4e2d",
                                             "1",
                                             "2",
                                             "\u0663",
                                             "\u00bd",
                                             "!",
                                             ".",
                                             "-",
                                             "\U0001f600",
                                             "<|endoftext|>",
                                             "<|im_end|>",
                                             "<|begin_of_text|>",
                                             "<|end_of_text|>"};
  std::mt19937_64 rng(20261207);  // fixed: the same texts every run
  for (const char* family : kFamilies) {
    auto tok = tokenizer_load_hf(testing::hf_family_fixture_dir(family));
    const HfPipeline pipeline = hf_bpe_read(testing::hf_family_fixture_dir(family)).pipeline;
    const json e = expected(family);
    int cuts = 0;
    for (const json& c : e.at("cases"))
      if (c.at("name") != "document")
        expect_cuts_keep_ids(*tok, pipeline, c.at("text"),
                             std::string(family) + " " + c["name"].dump(), &cuts);
    for (int k = 0; k < 300; ++k) {
      std::string text;
      const int n = 1 + static_cast<int>(rng() % 30);
      for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
      expect_cuts_keep_ids(*tok, pipeline, text,
                           std::string(family) + " random " + std::to_string(k), &cuts);
    }
    EXPECT_GT(cuts, 300) << family << ": the rules allow too few cuts to test";
  }
}

TEST(HfTokenizerFamilies, LongRunsEncodeAndRoundTrip) {
  // Pieces of hundreds of kB (one word, one white-space run, one digit run): the regex engine
  // must not run out of its stack, and the text must come back.
  const std::string text = std::string(300000, 'a') + std::string(300000, ' ') + "x" +
                           std::string(200000, '\n') + std::string(200000, '7') + " \xe4\xb8\xad";
  for (const char* family : kFamilies) {
    auto tok = tokenizer_load_hf(testing::hf_family_fixture_dir(family));
    std::vector<int32_t> ids;
    try {
      ids = tok->encode(text);
    } catch (const Error& e) {
      ADD_FAILURE() << family << ": " << e.what();
      continue;
    }
    EXPECT_TRUE(tok->decode(ids) == text) << family;
  }
}

}  // namespace
}  // namespace ledgerlm
