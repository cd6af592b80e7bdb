// The hf-bpe tokenizer (GPT-2 byte-level BPE read from Hugging Face files): ids equal to those of
// the tokenizers library on the committed fixture (tests/reference/gen_hf_tokenizer_fixture.py
// made it once; no Python runs here), from tokenizer.json, from vocab.json + merges.txt and from
// the older string form of merges; exact round trips; the pre-tokenizer's pieces and the Unicode
// classes it uses; the per-word cache under concurrent callers; the refusal, one line naming
// file and key, of every tokenizer directory it cannot reproduce; post-processors that add
// nothing (transformers 5's identity template) accepted, those that add tokens read as the ids
// put around each document; and the comparison of two tokenizers by the ids they define.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/byte_level.h"
#include "data/hf_bpe_files.h"
#include "data/prepare.h"
#include "data/pretokenize_gpt2.h"
#include "data/tokenizer.h"
#include "data/unicode_classes.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::error_of;

struct Case {
  std::string name, text;
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;  // the library's pre-tokenizer pieces, byte-level strings
};

std::vector<Case> expected_cases() {
  const json j = json::parse(testing::hf_tokenizer_fixture("expected.json"));
  std::vector<Case> out;
  for (const auto& c : j.at("cases")) {
    out.push_back({c.at("name"), c.at("text"), c.at("ids").get<std::vector<int32_t>>(),
                   c.at("pieces").get<std::vector<std::string>>()});
  }
  return out;
}

// A directory holding `files` (name -> content).
struct TokDir : testing::TempDir {
  explicit TokDir(std::initializer_list<std::pair<std::string, std::string>> files)
      : testing::TempDir("llm_hftok_") {
    for (const auto& [name, text] : files) testing::write_file(file(name), text);
  }
  std::string path() const { return file(""); }
};

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  Gpt2Splitter split(text);
  std::string_view p;
  while (split.next(&p)) out.emplace_back(p);
  return out;
}

// Every fixture case encodes to the library's ids and decodes back to its text.
void expect_fixture_ids(const Tokenizer& tok, const std::string& source) {
  const std::vector<Case> cases = expected_cases();
  ASSERT_GT(cases.size(), 150u);
  for (const Case& c : cases) {
    const std::vector<int32_t> got = tok.encode(c.text);
    if (got != c.ids) {
      size_t i = 0;
      while (i < got.size() && i < c.ids.size() && got[i] == c.ids[i]) ++i;
      ADD_FAILURE() << source << ", case " << c.name << ": ids differ from the tokenizers "
                    << "library's at index " << i << " (got " << got.size() << " ids, expected "
                    << c.ids.size() << ")";
    }
    EXPECT_EQ(tok.decode(c.ids), c.text) << source << ", case " << c.name;
  }
}

TEST(HfBpeTokenizer, MatchesTheLibraryFromTokenizerJson) {
  TokDir dir({{"tokenizer.json", testing::hf_tokenizer_fixture("tokenizer.json")}});
  auto tok = tokenizer_load_hf(dir.path());
  const json meta = json::parse(testing::hf_tokenizer_fixture("expected.json"));
  EXPECT_EQ(tok->vocab_size(), meta.at("vocab_size").get<int64_t>());
  EXPECT_EQ(tok->eot_id(), meta.at("eot_id").get<int32_t>());
  EXPECT_EQ(tok->name(), "hf-bpe");
  expect_fixture_ids(*tok, "tokenizer.json");
}

TEST(HfBpeTokenizer, MatchesTheLibraryFromVocabAndMerges) {
  TokDir dir({{"vocab.json", testing::hf_tokenizer_fixture("vocab.json")},
              {"merges.txt", testing::hf_tokenizer_fixture("merges.txt")}});
  auto tok = tokenizer_load_hf(dir.path());
  EXPECT_EQ(tok->vocab_size(), 1001);
  EXPECT_EQ(tok->eot_id(), 1000);
  expect_fixture_ids(*tok, "vocab.json + merges.txt");
}

TEST(HfBpeTokenizer, ReadsMergesWrittenAsStrings) {
  // Older versions of the library write each merge as "a b" rather than ["a", "b"].
  json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  json merges = json::array();
  for (const auto& m : j["model"]["merges"]) {
    merges.push_back(m.is_string() ? m.get<std::string>()
                                   : m[0].get<std::string>() + " " + m[1].get<std::string>());
  }
  j["model"]["merges"] = merges;
  TokDir dir({{"tokenizer.json", j.dump()}});
  expect_fixture_ids(*tokenizer_load_hf(dir.path()), "tokenizer.json with string merges");
}

TEST(HfBpeTokenizer, TokenizerJsonTakesPrecedenceAndSaveCopiesTheFilesAsRead) {
  // The fixture directory holds all three files; the copy is of tokenizer.json alone.
  auto tok = tokenizer_load_hf(testing::hf_tokenizer_fixture_dir());
  testing::TempDir out("llm_hfsave_");
  tok->save(out.file(""));
  EXPECT_EQ(out.entries(), std::vector<std::string>{"tokenizer.json"});
  EXPECT_EQ(testing::read_file(out.file("tokenizer.json")),
            testing::hf_tokenizer_fixture("tokenizer.json"));
  EXPECT_EQ(tokenizer_hf_id(out.file("")), tokenizer_hf_id(testing::hf_tokenizer_fixture_dir()));

  TokDir vm({{"vocab.json", testing::hf_tokenizer_fixture("vocab.json")},
             {"merges.txt", testing::hf_tokenizer_fixture("merges.txt")}});
  testing::TempDir out2("llm_hfsave_");
  tokenizer_load_hf(vm.path())->save(out2.file(""));
  EXPECT_EQ(out2.entries(), (std::vector<std::string>{"merges.txt", "vocab.json"}));
  EXPECT_EQ(testing::read_file(out2.file("merges.txt")),
            testing::hf_tokenizer_fixture("merges.txt"));
}

TEST(HfBpeTokenizer, RoundTripsRandomUtf8) {
  // Code points from every UTF-8 length, white space and the apostrophe, so that pieces of every
  // kind and bytes that the vocabulary only has as single-byte tokens both occur.
  TokDir dir({{"tokenizer.json", testing::hf_tokenizer_fixture("tokenizer.json")}});
  auto tok = tokenizer_load_hf(dir.path());
  const std::vector<uint32_t> starts = {0x0,    0x20,   0x41,   0xA0,   0x300,   0x600,
                                        0x3000, 0x4E00, 0xAC00, 0xFF10, 0x1F300, 0x20000};
  for (uint64_t t = 0; t < 200; ++t) {
    std::string text;
    const auto r = rng_bits(11, RngStream::kSample, t, 0);
    for (uint64_t k = 0; k < 1 + r[0] % 60; ++k) {
      const auto w = rng_bits(11, RngStream::kSample, t, k + 1);
      uint32_t cp = starts[w[0] % starts.size()] + w[1] % 0x60;
      if (w[2] % 5 == 0) cp = " '\t\n"[w[3] % 4];
      if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
      if (cp < 0x80) {
        text += static_cast<char>(cp);
      } else if (cp < 0x800) {
        text += static_cast<char>(0xC0 | (cp >> 6));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        text += static_cast<char>(0xE0 | (cp >> 12));
        text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      } else {
        text += static_cast<char>(0xF0 | (cp >> 18));
        text += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        text += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        text += static_cast<char>(0x80 | (cp & 0x3F));
      }
    }
    ASSERT_EQ(tok->decode(tok->encode(text)), text) << "text " << t;
  }
  EXPECT_NE(error_of([&] { tok->encode("bad \xC3("); }).find("not valid UTF-8 (byte 4)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { tok->decode(std::vector<int32_t>{1001}); }).find("outside the vocab"),
            std::string::npos);
  EXPECT_EQ(tok->decode(std::vector<int32_t>{tok->eot_id()}), kEotText);
}

TEST(HfBpeTokenizer, ConcurrentCallersGetTheSameIds) {
  // One caller at a time uses the shared cache, the others a cache of their own: the ids must
  // not depend on which.
  TokDir dir({{"tokenizer.json", testing::hf_tokenizer_fixture("tokenizer.json")}});
  auto tok = tokenizer_load_hf(dir.path());
  const std::vector<Case> cases = expected_cases();
  std::vector<std::thread> threads;
  std::vector<int> wrong(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 5; ++rep) {
        for (const Case& c : cases) wrong[t] += tok->encode(c.text) != c.ids;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong, std::vector<int>(4, 0));
}

TEST(Gpt2Splitter, SplitsAsTheLibrary) {
  // The fixture's pieces are the library's pre-tokenizer output for the whole text (the added
  // token <|endoftext|> included as plain text), so they test the split pattern on its own: with
  // a 1000-token vocabulary many wrong splits would still give the right ids.
  for (const Case& c : expected_cases()) {
    std::vector<std::string> got;
    for (const std::string& p : pieces(c.text)) got.push_back(byte_level_encode(p));
    EXPECT_EQ(got, c.pieces) << "case " << c.name;
  }
}

TEST(Gpt2Splitter, SplitsAsThePattern) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces(""), V{});
  EXPECT_EQ(pieces("Hello world"), (V{"Hello", " world"}));
  // A space run before a word leaves its last space to the word; at the end it stays whole.
  EXPECT_EQ(pieces("a   b  "), (V{"a", "  ", " b", "  "}));
  // One white-space character before a non-space is a piece of its own.
  EXPECT_EQ(pieces("\t\thi"), (V{"\t", "\t", "hi"}));
  EXPECT_EQ(pieces("x \t y"), (V{"x", " \t", " y"}));
  // Contractions are lower case only; an apostrophe after a space starts a symbol run.
  EXPECT_EQ(pieces("it's I'M 'll"), (V{"it", "'s", " I", "'", "M", " '", "ll"}));
  EXPECT_EQ(pieces("abc123!!x"), (V{"abc", "123", "!!", "x"}));
  // U+00A0 and U+3000 are white space; U+0301 (a combining mark) is a symbol.
  EXPECT_EQ(pieces("a\u00A0\u00A0b"), (V{"a", "\u00A0", "\u00A0", "b"}));
  EXPECT_EQ(pieces("e\u0301t"), (V{"e", "\u0301", "t"}));
  EXPECT_EQ(pieces(" \u0661\u0662"), (V{" \u0661\u0662"}));
}

TEST(UnicodeClasses, GeneratedTablesAnswerAsUnicode14) {
  EXPECT_STREQ(unicode_version(), "14.0.0");
  EXPECT_EQ(unicode_class('a'), UnicodeClass::kLetter);
  EXPECT_EQ(unicode_class('7'), UnicodeClass::kNumber);
  EXPECT_EQ(unicode_class('\''), UnicodeClass::kOther);
  for (uint32_t cp : {0x09u, 0x0Du, 0x20u, 0x85u, 0xA0u, 0x1680u, 0x2000u, 0x200Au, 0x2028u,
                      0x2029u, 0x202Fu, 0x205Fu, 0x3000u}) {
    EXPECT_EQ(unicode_class(cp), UnicodeClass::kSpace) << std::hex << cp;
  }
  EXPECT_EQ(unicode_class(0x200B), UnicodeClass::kOther);  // zero width space: Cf, not White_Space
  EXPECT_EQ(unicode_class(0x180E), UnicodeClass::kOther);  // Zs before Unicode 6.3, Cf since
  EXPECT_EQ(unicode_class(0x00E9), UnicodeClass::kLetter);
  EXPECT_EQ(unicode_class(0x0663), UnicodeClass::kNumber);   // Arabic-Indic digit (Nd)
  EXPECT_EQ(unicode_class(0x2160), UnicodeClass::kNumber);   // Roman numeral one (Nl)
  EXPECT_EQ(unicode_class(0x00BD), UnicodeClass::kNumber);   // one half (No)
  EXPECT_EQ(unicode_class(0x0301), UnicodeClass::kOther);    // combining acute (Mn)
  EXPECT_EQ(unicode_class(0x1F600), UnicodeClass::kOther);   // emoji (So), above the BMP table
  EXPECT_EQ(unicode_class(0x20000), UnicodeClass::kLetter);  // CJK extension B (Lo)
  EXPECT_EQ(unicode_class(0x1D7CE), UnicodeClass::kNumber);  // mathematical bold digit zero
  EXPECT_EQ(unicode_class(0x10FFFF), UnicodeClass::kOther);
  EXPECT_EQ(unicode_class(0x110000), UnicodeClass::kOther);
}

TEST(ByteLevel, IsGpt2sAlphabet) {
  EXPECT_EQ(byte_level_code_point(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_level_code_point('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_level_code_point('A'), uint32_t{'A'});
  EXPECT_EQ(byte_level_code_point(0xAD), 0x143u);  // the last of the 68 moved bytes
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(byte_level_decode(byte_level_encode(all), &back));
  EXPECT_EQ(back, all);
  EXPECT_FALSE(byte_level_decode(" ", &back));  // a plain space is not in the alphabet
}

// tokenizer.json with `edit` applied, in a directory of its own; returns the load error.
std::string load_error_after(const std::function<void(json&)>& edit) {
  json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  edit(j);
  TokDir dir({{"tokenizer.json", j.dump()}});
  return error_of([&] { tokenizer_load_hf(dir.path()); });
}

TEST(HfBpeTokenizer, RefusesWhatItCannotReproduce) {
  struct Refusal {
    const char* what;
    std::function<void(json&)> edit;
    const char* message;  // a part of the expected one-line error
  };
  const std::vector<Refusal> refusals = {
      {"a normalizer other than NFC",
       [](json& j) {
         j["normalizer"] = {{"type", "Lowercase"}};
       },
       "tokenizer.json: key 'normalizer' is {\"type\":\"Lowercase\"}, expected null, NFC"},
      {"NFKC in a Sequence",
       [](json& j) {
         j["normalizer"] = {{"type", "Sequence"},
                            {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "NFKC"}}})}};
       },
       "key 'normalizer' is {\"type\":\"NFKC\"}"},
      {"another pre-tokenizer",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
       },
       "key 'pre_tokenizer' step 0 (Whitespace) is not supported, expected ByteLevel"},
      {"an unknown Split regex",
       [](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers", json::array({{{"type", "Split"},
                                             {"pattern", {{"Regex", "\\w+|\\W+"}}},
                                             {"behavior", "Isolated"},
                                             {"invert", false}},
                                            j["pre_tokenizer"]})}};
       },
       "key 'pre_tokenizer' step 0 (Split) has the regex \"\\w+|\\W+\", expected GPT-2's, "
       "Llama-3's or Qwen2's"},
      {"a Split that removes",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({{{"type", "Split"},
                                                               {"pattern", {{"Regex", "x"}}},
                                                               {"behavior", "Removed"},
                                                               {"invert", false}},
                                                              j["pre_tokenizer"]})}};
       },
       "step 0 (Split) has behavior \"Removed\", expected \"Isolated\""},
      {"ByteLevel not last",
       [](json& j) {
         j["pre_tokenizer"] = {
             {"type", "Sequence"},
             {"pretokenizers", json::array({j["pre_tokenizer"],
                                            {{"type", "Digits"}, {"individual_digits", true}}})}};
       },
       "step 0 (ByteLevel) is not the last step"},
      {"byte fallback", [](json& j) { j["model"]["byte_fallback"] = true; },
       "key 'model.byte_fallback' is true"},
      {"TinyLlama's sentencepiece-style normalizer",
       [](json& j) {
         j["normalizer"] = json::parse(R"({"type": "Sequence", "normalizers": [
             {"type": "Prepend", "prepend": "\u2581"},
             {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})");
       },
       "key 'normalizer' is {\"prepend\":\"\u2581\",\"type\":\"Prepend\"}, expected null, NFC"},
      {"a prefix space", [](json& j) { j["pre_tokenizer"]["add_prefix_space"] = true; },
       "key 'pre_tokenizer'"},
      {"no regex", [](json& j) { j["pre_tokenizer"]["use_regex"] = false; }, "key 'pre_tokenizer'"},
      {"no pre-tokenizer", [](json& j) { j["pre_tokenizer"] = nullptr; },
       "key 'pre_tokenizer' is missing or null"},
      {"another decoder",
       [](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
       },
       "key 'decoder'"},
      {"a template post-processor",
       [](json& j) {
         j["post_processor"] = {{"type", "TemplateProcessing"}};
       },
       "key 'post_processor'"},
      {"truncation",
       [](json& j) {
         j["truncation"] = {{"max_length", 8}};
       },
       "key 'truncation'"},
      {"a WordPiece model", [](json& j) { j["model"]["type"] = "WordPiece"; },
       "key 'model.type' is \"WordPiece\", expected \"BPE\""},
      {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "key 'model.dropout' is 0.1"},
      {"a subword prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
       "key 'model.continuing_subword_prefix'"},
      {"no end-of-text", [](json& j) { j["added_tokens"] = json::array(); },
       "has no <|endoftext|> added token (expected an end-of-text token"},
      {"a post-processor token not in the vocabulary",
       [](json& j) {
         j["post_processor"] = {
             {"type", "TemplateProcessing"},
             {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})}};
       },
       "key 'post_processor' adds \"<s>\", which is not a token of the vocabulary"},
      {"an added token that strips", [](json& j) { j["added_tokens"][0]["lstrip"] = true; },
       "has lstrip true"},
      {"a missing byte", [](json& j) { j["model"]["vocab"].erase("\u010A"); },
       "lacks the byte-level token \"\u010A\" for byte 10"},
      {"a merge of unknown tokens",
       [](json& j) {
         j["model"]["merges"][0] = json::array({"\u0120", "qqqq"});
       },
       "merge 0 (\"\u0120 qqqq\") names a token not in the vocabulary"},
      {"a gap in the ids", [](json& j) { j["added_tokens"][0]["id"] = 1005; },
       "no token has id 1000"},
      {"a non-byte-level token", [](json& j) { j["model"]["vocab"]["\u4e2d"] = 1001; },
       "is not byte-level text"},
      {"a bad merge entry", [](json& j) { j["model"]["merges"][3] = 7; },
       "key 'model.merges' entry 3 is 7"},
  };
  for (const Refusal& r : refusals) {
    const std::string err = load_error_after(r.edit);
    EXPECT_NE(err.find(r.message), std::string::npos) << r.what << ": got \"" << err << "\"";
    EXPECT_EQ(err.find('\n'), std::string::npos) << r.what << ": not one line";
  }
  // Missing files: the directory is named with what was expected.
  TokDir empty({});
  EXPECT_NE(error_of([&] {
              tokenizer_load_hf(empty.path());
            }).find("has no tokenizer.json and no vocab.json + merges.txt"),
            std::string::npos);
  TokDir vocab_only({{"vocab.json", testing::hf_tokenizer_fixture("vocab.json")}});
  EXPECT_NE(error_of([&] {
              tokenizer_load_hf(vocab_only.path());
            }).find("has no tokenizer.json and no merges.txt"),
            std::string::npos);
  TokDir bad_merges({{"vocab.json", testing::hf_tokenizer_fixture("vocab.json")},
                     {"merges.txt", "#version: 0.2\na b c\n"}});
  EXPECT_NE(error_of([&] {
              tokenizer_load_hf(bad_merges.path());
            }).find("merges.txt: line 2 is \"a b c\", expected two tokens"),
            std::string::npos);
  TokDir not_json({{"tokenizer.json", "{\"model\": "}});
  EXPECT_NE(error_of([&] { tokenizer_load_hf(not_json.path()); }).find("invalid JSON"),
            std::string::npos);
}

// The shards `prepare --tokenizer hf:DIR` writes for a fixed corpus with `tokenizer_json`:
// train.bin and val.bin, concatenated.
std::string shards_with(const std::string& tokenizer_json) {
  TokDir tok({{"tokenizer.json", tokenizer_json}});
  testing::TempDir tmp("llm_hfshards_");
  std::string corpus;
  for (const Case& c : expected_cases()) corpus += c.text + "\n";
  testing::write_file(tmp.file("corpus.txt"), corpus);
  PrepareOptions opt;
  opt.inputs = {tmp.file("corpus.txt")};
  opt.out_dir = tmp.file("out");
  opt.tokenizer = "hf:" + tok.path();
  opt.val_fraction = 0.1;
  opt.threads = 1;
  opt.quiet = true;
  data_prepare(opt);
  return testing::read_file(tmp.file("out/train.bin")) +
         testing::read_file(tmp.file("out/val.bin"));
}

// transformers 5's identity template: single = $A, pair = $A $B, no special tokens.
json identity_template() {
  return json::parse(R"({"type": "TemplateProcessing",
    "single": [{"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {}})");
}

TEST(HfBpeTokenizer, PostProcessorsThatAddNothingGiveTheSameShardsAsNull) {
  json base = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  base["post_processor"] = nullptr;
  const std::string want = shards_with(base.dump());
  ASSERT_GT(want.size(), 1000u);
  const json byte_level = {{"type", "ByteLevel"},
                           {"add_prefix_space", true},
                           {"trim_offsets", true},
                           {"use_regex", true}};
  const std::vector<std::pair<const char*, json>> accepted = {
      {"identity TemplateProcessing (transformers 5)", identity_template()},
      {"ByteLevel", byte_level},
      {"Sequence of ByteLevel and the identity template",
       {{"type", "Sequence"}, {"processors", json::array({byte_level, identity_template()})}}},
  };
  for (const auto& [what, pp] : accepted) {
    json j = base;
    j["post_processor"] = pp;
    std::string got;
    try {
      got = shards_with(j.dump());
    } catch (const Error& e) {
      ADD_FAILURE() << what << ": refused: " << e.what();
      continue;
    }
    EXPECT_TRUE(got == want) << what << ": the shards differ from post_processor null's";
  }
}

TEST(HfBpeTokenizer, PostProcessorsThatAddTokensPutThemAroundEachDocument) {
  // What a single text gets before and after its ids: Llama-3's BOS template, an EOS template,
  // RoBERTa's pair, and templates in a Sequence (each wraps what the one before made).
  const json eot = {{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}};
  const json seq_a = identity_template()["single"][0];
  auto tpl = [](json single) {
    return json{{"type", "TemplateProcessing"}, {"single", std::move(single)}};
  };
  const int32_t e = 1000;  // the fixture's <|endoftext|>
  const std::vector<std::tuple<const char*, json, std::vector<int32_t>, std::vector<int32_t>>>
      accepted = {
          {"eot after", tpl(json::array({seq_a, eot})), {}, {e}},
          {"eot before, in a Sequence",
           {{"type", "Sequence"},
            {"processors", json::array({{{"type", "ByteLevel"}}, tpl(json::array({eot, seq_a}))})}},
           {e},
           {}},
          {"two templates in a Sequence",
           {{"type", "Sequence"},
            {"processors",
             json::array({tpl(json::array({eot, seq_a})), tpl(json::array({eot, seq_a, eot}))})}},
           {e, e},
           {e}},
          {"RoBERTa's",
           {{"type", "RobertaProcessing"},
            {"cls", json::array({"<|endoftext|>", e})},
            {"sep", json::array({"<|endoftext|>", e})}},
           {e},
           {e}},
      };
  for (const auto& [what, pp, before, after] : accepted) {
    json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
    j["post_processor"] = pp;
    TokDir dir({{"tokenizer.json", j.dump()}});
    auto tok = tokenizer_load_hf(dir.path());
    EXPECT_EQ(tok->doc_prefix(), before) << what;
    EXPECT_EQ(tok->doc_suffix(), after) << what;
  }
  const std::vector<std::tuple<const char*, json, const char*>> refused = {
      {"a template without $A", tpl(json::array({eot})), "key 'post_processor' is"},
      {"an unknown kind", {{"type", "Prepend"}}, "key 'post_processor' is"},
      {"an id other than the vocabulary's",
       {{"type", "TemplateProcessing"},
        {"single", json::array({eot, seq_a})},
        {"special_tokens",
         {{"<|endoftext|>",
           {{"id", "<|endoftext|>"},
            {"ids", json::array({7})},
            {"tokens", json::array({"<|endoftext|>"})}}}}}},
       "key 'post_processor' gives \"<|endoftext|>\" the id 7 but the vocabulary gives it 1000"},
  };
  for (const auto& [what, pp, message] : refused) {
    const std::string err = load_error_after([&](json& j) { j["post_processor"] = pp; });
    EXPECT_NE(err.find(message), std::string::npos) << what << ": got \"" << err << "\"";
    EXPECT_EQ(err.find('\n'), std::string::npos) << what << ": not one line";
  }
}

TEST(HfBpeTokenizer, MergesFaultsNameMergesTxt) {
  // A merge of a token vocab.json lacks is a fault of merges.txt (at its line), not vocab.json.
  TokDir dir({{"vocab.json", testing::hf_tokenizer_fixture("vocab.json")},
              {"merges.txt", "#version: 0.2\nt h\nqqqq zzzz\n"}});
  const std::string err = error_of([&] { tokenizer_load_hf(dir.path()); });
  EXPECT_EQ(err.rfind(dir.file("merges.txt") + ": line 3: merge 1 (\"qqqq zzzz\")", 0), 0u) << err;
  EXPECT_NE(err.find("names a token not in the vocabulary of "), std::string::npos) << err;
}

TEST(HfBpeTokenizer, DifferenceComparesTheIdsNotTheFileForm) {
  // The fixture as tokenizer.json and as vocab.json + merges.txt is one tokenizer.
  TokDir vm({{"vocab.json", testing::hf_tokenizer_fixture("vocab.json")},
             {"merges.txt", testing::hf_tokenizer_fixture("merges.txt")}});
  TokDir tj({{"tokenizer.json", testing::hf_tokenizer_fixture("tokenizer.json")}});
  EXPECT_EQ(hf_bpe_difference(hf_bpe_read(tj.path()), "a", hf_bpe_read(vm.path()), "b"), "");
  // Two ids swapped: the same size, other ids.
  json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
  json& vocab = j["model"]["vocab"];
  const std::string x = "\u0120the", y = "\u0120and";
  ASSERT_TRUE(vocab.contains(x) && vocab.contains(y));
  const json id_x = vocab[x];
  vocab[x] = vocab[y];
  vocab[y] = id_x;
  TokDir swapped({{"tokenizer.json", j.dump()}});
  const int first = std::min(vocab[x].get<int>(), vocab[y].get<int>());
  EXPECT_EQ(hf_bpe_difference(hf_bpe_read(tj.path()), "a", hf_bpe_read(swapped.path()), "b")
                .rfind("id " + std::to_string(first) + " is ", 0),
            0u);
}

TEST(HfBpeTokenizer, IgnoreMergesTakesAWholeVocabularyEntry) {
  // With model.ignore_merges a piece that is itself in the vocabulary is that one token, even
  // when no merge would build it; without it the same piece is merged from its bytes.
  auto with_entry = [](bool ignore) {
    json j = json::parse(testing::hf_tokenizer_fixture("tokenizer.json"));
    j["model"]["vocab"]["\u0120xyzzy"] = 1001;  // " xyzzy": no merge makes it
    j["model"]["ignore_merges"] = ignore;
    return j.dump();
  };
  TokDir on_dir({{"tokenizer.json", with_entry(true)}});
  TokDir off_dir({{"tokenizer.json", with_entry(false)}});
  auto on = tokenizer_load_hf(on_dir.path());
  auto off = tokenizer_load_hf(off_dir.path());
  const std::vector<int32_t> a = on->encode("a");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(on->encode("a xyzzy"), (std::vector<int32_t>{a[0], 1001}));
  const std::vector<int32_t> merged = off->encode("a xyzzy");
  EXPECT_GT(merged.size(), 2u);
  EXPECT_EQ(std::count(merged.begin(), merged.end(), 1001), 0);
  EXPECT_EQ(off->decode(merged), "a xyzzy");
  EXPECT_EQ(on->decode(std::vector<int32_t>{1001}), " xyzzy");
}

}  // namespace
}  // namespace ledgerlm
