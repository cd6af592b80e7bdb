// Our checks around tokenizer files, fed a set of damaged and foreign tokenizer.model files
// (sentencepiece itself is not built with the sanitizers, so instead of fuzzing it this test
// feeds it a fixed, varied set; under the sanitizer build it also proves our side reads them
// without memory errors): empty, truncated at many points, bytes flipped across the file,
// garbage, a JSON file, and real sentencepiece models ledgerlm did not make (default
// normalization, no eot, no byte fallback). Each one is refused with one Error naming the file,
// or — for a flip that leaves a valid model ledgerlm can use — loads and round-trips exactly.
// The Hugging Face export's reading of tokenizer.model (data/tokenizer_json.h) gets the same set.
#include <gtest/gtest.h>

#include <string>
#include <unordered_map>
#include <vector>

#include <sentencepiece_trainer.h>

#include "data/tokenizer.h"
#include "data/tokenizer_json.h"
#include "model/base/check.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

const std::string& training_text() {
  static const std::string text = [] {
    std::string t;
    for (int i = 0; i < 300; ++i) t += "the quick brown fox " + std::to_string(i % 17) + "\n";
    return t;
  }();
  return text;
}

std::string good_model() {
  testing::TempDir dir("llm_tokdmg_");
  tokenizer_train_bpe({training_text()}, 300, 1)->save(dir.file(""));
  return testing::read_file(dir.file("tokenizer.model"));
}

// A sentencepiece model trained with `extra` settings over sentencepiece's defaults.
std::string foreign_model(const std::unordered_map<std::string, std::string>& extra) {
  testing::TempDir dir("llm_tokfor_");
  testing::write_file(dir.file("text.txt"), training_text());
  std::unordered_map<std::string, std::string> kw = {
      {"input", dir.file("text.txt")}, {"model_type", "bpe"}, {"vocab_size", "300"},
      {"hard_vocab_limit", "false"},   {"minloglevel", "2"},  {"num_threads", "1"}};
  for (const auto& [k, v] : extra) kw[k] = v;
  std::string proto;
  auto st = sentencepiece::SentencePieceTrainer::Train(kw, nullptr, &proto);
  EXPECT_TRUE(st.ok()) << st.ToString();
  return proto;
}

// Loads `bytes` as DIR/tokenizer.model: "" if it loads and round-trips, else the error.
std::string load_result(const std::string& bytes) {
  testing::TempDir dir("llm_tokload_");
  const std::string path = dir.file("tokenizer.model");
  testing::write_file(path, bytes);
  try {
    auto tok = tokenizer_load_bpe(path);
    for (const std::string text : {"a  b\t\tc \n\n d\xC3\xAF", "the quick brown fox 12\n"})
      if (tok->decode(tok->encode(text)) != text) return "loaded but does not round-trip";
    return "";
  } catch (const Error& e) {
    const std::string msg = e.what();
    return msg.find(path) == std::string::npos ? "error without the file name: " + msg : msg;
  }
}

TEST(TokenizerDamaged, EveryVariantRefusedNamingTheFileOrUsable) {
  const std::string good = good_model();
  ASSERT_GT(good.size(), 1000u);
  ASSERT_EQ(load_result(good), "");
  std::vector<std::pair<std::string, std::string>> variants = {
      {"empty", ""},
      {"garbage", "this is not a sentencepiece model at all\n"},
      {"json", "{\"pieces\": []}"},
      {"zeros", std::string(4096, '\0')},
      {"default_settings", foreign_model({})},
      {"no_byte_fallback", foreign_model({{"user_defined_symbols", "<|endoftext|>"}})},
      {"eot_but_normalized",
       foreign_model({{"control_symbols", "<|endoftext|>"}, {"byte_fallback", "true"}})},
  };
  for (size_t cut :
       {size_t{1}, size_t{7}, size_t{100}, good.size() / 3, good.size() / 2, good.size() - 1})
    variants.push_back({"truncated_" + std::to_string(cut), good.substr(0, cut)});
  for (size_t at = 0; at < good.size(); at += good.size() / 40 + 1) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    variants.push_back({"flipped_" + std::to_string(at), flipped});
  }
  int refused = 0;
  for (const auto& [name, bytes] : variants) {
    const std::string r = load_result(bytes);
    EXPECT_EQ(r.find("error without the file name"), std::string::npos) << name << ": " << r;
    EXPECT_NE(r, "loaded but does not round-trip") << name;
    refused += !r.empty();
  }
  // Every whole-file variant is refused; most flips are too.
  EXPECT_GE(refused, 7 + 6);
}

// The export's own protobuf reading and its checks of the settings it maps: a model it cannot
// reproduce exactly is one Error naming the file, never a crash or a quietly different tokenizer.
TEST(TokenizerDamaged, HfExportRefusesModelsItCannotReproduceNamingTheFile) {
  const std::string origin = "data/tokenizer.model";
  auto export_result = [&](const std::string& bytes) -> std::string {
    try {
      const HfTokenizerFiles f = hf_tokenizer_files_bpe(bytes, origin, 0);
      return f.tokenizer_json.empty() ? "empty tokenizer.json" : "";
    } catch (const Error& e) {
      const std::string msg = e.what();
      return msg.find(origin) == std::string::npos ? "error without the file name: " + msg : msg;
    }
  };
  const std::string good = good_model();
  EXPECT_EQ(export_result(good), "");
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"empty", ""},
      {"garbage", "this is not a sentencepiece model at all\n"},
      {"zeros", std::string(4096, '\0')},
      {"default_settings", foreign_model({})},
      {"unigram", foreign_model({{"model_type", "unigram"},
                                 {"normalization_rule_name", "identity"},
                                 {"add_dummy_prefix", "false"},
                                 {"remove_extra_whitespaces", "false"},
                                 {"byte_fallback", "true"}})},
      {"dummy_prefix", foreign_model({{"normalization_rule_name", "identity"},
                                      {"remove_extra_whitespaces", "false"},
                                      {"byte_fallback", "true"}})},
      {"no_byte_fallback", foreign_model({{"normalization_rule_name", "identity"},
                                          {"add_dummy_prefix", "false"},
                                          {"remove_extra_whitespaces", "false"}})},
      {"truncated_7", good.substr(0, 7)},
      {"truncated_half", good.substr(0, good.size() / 2)},
  };
  for (const auto& [name, bytes] : refused) {
    const std::string r = export_result(bytes);
    EXPECT_NE(r, "") << name;
    EXPECT_EQ(r.find("error without the file name"), std::string::npos) << name << ": " << r;
  }
  // Flipped bytes anywhere: refused naming the file, or a model that still reads (a flipped
  // score or piece byte), never a crash.
  for (size_t at = 0; at < good.size(); at += good.size() / 40 + 1) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x5a);
    const std::string r = export_result(flipped);
    EXPECT_EQ(r.find("error without the file name"), std::string::npos) << at << ": " << r;
  }
}

}  // namespace
}  // namespace ledgerlm
