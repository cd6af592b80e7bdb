// The GPT-2 config.json reader of `import --format hf` (ckpt/hf_import.h), in process: the text
// export writes reads back to the same ModelConfig, GPT2Config's defaults fill absent keys, and
// ill-typed or inconsistent values are one Error naming the key. The refusals of what ledgerlm
// cannot represent are tested through the binary (tests/e2e/test_import_hf.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/hf_export.h"
#include "ckpt/hf_import.h"
#include "model/base/check.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using nlohmann::json;

ModelConfig read(const std::string& text, std::vector<std::string>* notes = nullptr) {
  return hf_config_from_json(text, "config 'c.json'", notes);
}

TEST(HfConfig, ExportTextReadsBackToTheSameModel) {
  for (const ModelConfig& m : {ModelConfig{257, 2, 2, 32, 32, 0.0, "none", {}},
                               ModelConfig{50257, 12, 12, 768, 1024, 0.1, "none", {}},
                               ModelConfig{1000, 3, 5, 80, 7, 0.25, "none", {}}}) {
    std::vector<std::string> notes;
    const ModelConfig back = read(hf_config_json_text(m, {5, 5}), &notes);
    EXPECT_EQ(back.vocab_size, m.vocab_size);
    EXPECT_EQ(back.n_layer, m.n_layer);
    EXPECT_EQ(back.n_head, m.n_head);
    EXPECT_EQ(back.n_embd, m.n_embd);
    EXPECT_EQ(back.block_size, m.block_size);
    EXPECT_EQ(back.dropout, m.dropout);
    EXPECT_TRUE(notes.empty());  // one dropout written three times: nothing merged
  }
}

// The MLP's width travels as n_inner: null for GPT-2's 4 x n_embd (model.ffn_hidden 0 or that
// width), the number otherwise, and it reads back to the same width.
TEST(HfConfig, MlpWidthTravelsAsNInner) {
  ModelConfig m{257, 2, 2, 32, 32, 0.0, "none", {}};
  EXPECT_TRUE(json::parse(hf_config_json_text(m))["n_inner"].is_null());
  m.ffn_hidden = 128;  // = 4 x 32
  EXPECT_TRUE(json::parse(hf_config_json_text(m))["n_inner"].is_null());
  EXPECT_EQ(read(hf_config_json_text(m)).ffn_width(), 128);
  m.ffn_hidden = 48;
  EXPECT_EQ(json::parse(hf_config_json_text(m))["n_inner"], 48);
  EXPECT_EQ(read(hf_config_json_text(m)).ffn_hidden, 48);
}

// The untied head travels as tie_word_embeddings = false (its lm_head.weight is a table tensor);
// the MLP variants and the logit soft-cap, which GPT-2 cannot hold, are refused naming the key.
void expect_refused(const ModelConfig& m, const std::string& what) {
  try {
    hf_config_json_text(m);
    ADD_FAILURE() << what << ": exported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(HfConfig, UntiedHeadTravelsMlpVariantsAndSoftcapRefused) {
  ModelConfig m{257, 2, 2, 32, 32, 0.0, "none", {}};
  EXPECT_EQ(json::parse(hf_config_json_text(m))["tie_word_embeddings"], true);
  EXPECT_TRUE(read(hf_config_json_text(m)).tie_embeddings);
  m.tie_embeddings = false;
  EXPECT_EQ(json::parse(hf_config_json_text(m))["tie_word_embeddings"], false);
  EXPECT_FALSE(read(hf_config_json_text(m)).tie_embeddings);
  for (const char* mlp : {"swiglu", "relu2"}) {
    ModelConfig v = m;
    v.mlp = mlp;
    expect_refused(v, std::string("model.mlp = ") + mlp);
  }
  m.logit_softcap = 30.0;
  expect_refused(m, "model.logit_softcap = 30");
}

// GPT2LMHeadModel has no rotary positions, grouped-query attention or QK-norm: the export refuses
// each, naming the key.
TEST(HfConfig, AttentionVariantsAreRefusedNamingTheKey) {
  const ModelConfig gpt2{257, 2, 2, 32, 32, 0.0, "none", {}};
  ModelConfig m = gpt2;
  m.position = "rope";
  EXPECT_NE(testing::error_of([&] { hf_config_json_text(m); }).find("model.position = rope"),
            std::string::npos);
  m = gpt2;
  m.n_kv_head = 1;
  EXPECT_NE(testing::error_of([&] { hf_config_json_text(m); }).find("model.n_kv_head = 1"),
            std::string::npos);
  m = gpt2;
  m.qk_norm = true;
  EXPECT_NE(testing::error_of([&] { hf_config_json_text(m); }).find("model.qk_norm = true"),
            std::string::npos);
  m = gpt2;
  m.n_kv_head = 2;  // = n_head: GPT-2's attention
  EXPECT_NO_THROW(hf_config_json_text(m));
}

// model.norm: GPT2LMHeadModel holds LayerNorm with weight, bias and eps 1e-5 and every
// bias; the export refuses any other norm or bias setting in one Error naming the key.
TEST(HfConfig, ExportRefusesNormsAndBiasesGpt2CannotHold) {
  const ModelConfig base{257, 2, 2, 32, 32, 0.0, "none", {}};
  EXPECT_NO_THROW(hf_require_gpt2_block(base));
  struct Case {
    void (*set)(ModelConfig*);
    const char* key;
  };
  for (const Case& c :
       {Case{[](ModelConfig* m) { m->norm = "rmsnorm"; }, "model.norm = rmsnorm"},
        Case{[](ModelConfig* m) { m->norm_weight = false; }, "model.norm_weight = false"},
        Case{[](ModelConfig* m) { m->norm_eps = 1e-6; }, "model.norm_eps = 1e-06"},
        Case{[](ModelConfig* m) { m->bias = false; }, "model.bias = false"}}) {
    ModelConfig m = base;
    c.set(&m);
    const std::string err = testing::error_of([&] { hf_config_json_text(m); });
    EXPECT_NE(err.find(c.key), std::string::npos) << err;
    EXPECT_NE(err.find("GPT2LMHeadModel"), std::string::npos) << err;
  }
}

TEST(HfConfig, AbsentKeysTakeGpt2ConfigDefaults) {
  // Sizes and model_type only, as a hand-written config might be: gelu_new, eps 1e-5, tied,
  // dropout 0.1 everywhere.
  const ModelConfig m = read(
      R"({"model_type": "gpt2", "vocab_size": 50, "n_positions": 16, "n_embd": 8,
          "n_layer": 1, "n_head": 2})");
  EXPECT_EQ(m.vocab_size, 50);
  EXPECT_EQ(m.padded_vocab(), 64);
  EXPECT_EQ(m.block_size, 16);
  EXPECT_DOUBLE_EQ(m.dropout, 0.1);
}

TEST(HfConfig, IllTypedOrInconsistentValuesNameTheKey) {
  const json base =
      json::parse(hf_config_json_text(ModelConfig{257, 2, 2, 32, 32, 0.0, "none", {}}));
  struct Case {
    const char* key;
    json value;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"n_layer", "2", "n_layer is \"2\", expected a positive integer"},
      {"n_head", 0, "n_head is 0, expected a positive integer"},
      {"n_embd", 33, "n_embd 33 is not a multiple of n_head 2"},
      {"vocab_size", nullptr, "no 'vocab_size'"},
      {"tie_word_embeddings", "yes", "tie_word_embeddings is \"yes\", expected true or false"},
      {"layer_norm_epsilon", "1e-5", "layer_norm_epsilon is \"1e-5\", expected a number"},
      {"resid_pdrop", 1.0, "dropout probabilities must be in [0, 1)"},
      {"n_inner", 64.5, "n_inner is 64.5, expected null or 1.."},
  };
  for (const Case& c : cases) {
    json j = base;
    j[c.key] = c.value;
    const std::string err = testing::error_of([&] { read(j.dump()); });
    EXPECT_NE(err.find("config 'c.json': "), std::string::npos) << c.key << ": " << err;
    EXPECT_NE(err.find(c.needle), std::string::npos) << c.key << ": " << err;
  }
  EXPECT_NE(testing::error_of([] { read("{\"model_type\": "); }).find("not valid JSON"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { read("[1, 2]"); }).find("expected a JSON object"),
            std::string::npos);
}

}  // namespace
}  // namespace ledgerlm
