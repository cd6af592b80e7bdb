// The activation list (model/activation_list.h) against the allocator: for every recompute mode,
// with blocks that get no backward, with adapters and in fp64, GptModel::plan carves exactly the
// buffers the list names, as many of each and of the same bytes, and the tracked allocations are
// the lists' sums (what the memory planner predicts from the same lists).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/activation_list.h"
#include "model/backend/backend.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "tests/support/config_test_support.h"

namespace ledgerlm {
namespace {

struct Case {
  const char* recompute;
  const char* freeze = "";  // train.freeze globs
  int64_t untrained = 0;    // blocks below the lowest trained one (what `freeze` leaves)
  int64_t lora_rank = 0;
  double lora_dropout = 0.0;
  DType dtype = DType::kF32;
  int64_t ffn_hidden = 0;      // model.ffn_hidden (0: 4 C)
  const char* mlp = "gelu";    // model.mlp
  bool tie_embeddings = true;  // model.tie_embeddings
  // Attention variants: grouped-query (n_kv_head, of n_head 4 here when set), qk_norm, rope.
  int64_t n_kv_head = 0;
  bool qk_norm = false;
  bool rope = false;
  const char* norm = "layernorm";  // model.norm: RMSNorm keeps no mean
};

std::string describe(const Case& c) {
  return std::string("recompute ") + c.recompute + ", freeze '" + c.freeze + "', lora rank " +
         std::to_string(c.lora_rank) + ", dropout " + std::to_string(c.lora_dropout) + ", " +
         dtype_name(c.dtype) + ", ffn_hidden " + std::to_string(c.ffn_hidden) + ", mlp " + c.mlp +
         (c.tie_embeddings ? "" : ", untied") + ", n_kv_head " + std::to_string(c.n_kv_head) +
         (c.qk_norm ? ", qk_norm" : "") + (c.rope ? ", rope" : "") + ", " + c.norm;
}

ModelConfig config_of(const Case& c) {
  // vocab 70 padded to 128: the logits' row is not the vocabulary
  ModelConfig m = testing::model_config_of({.vocab = 70, .L = 4, .H = 2, .C = 24, .block = 16});
  m.recompute = c.recompute;
  m.lora.rank = c.lora_rank;
  m.lora.dropout = c.lora_dropout;
  m.lora.targets = "qkv,mlp_proj";
  m.ffn_hidden = c.ffn_hidden;
  m.mlp = c.mlp;
  m.tie_embeddings = c.tie_embeddings;
  if (c.n_kv_head > 0) m.n_head = 4;
  m.n_kv_head = c.n_kv_head;
  m.qk_norm = c.qk_norm;
  m.position = c.rope ? "rope" : "learned";
  m.norm = c.norm;
  m.bias = std::string(c.norm) == "layernorm";  // RMSNorm runs come without biases (Llama)
  return m;
}

// name -> (buffers, bytes of each); a name carved with two sizes fails the test.
using Tally = std::map<std::string, std::pair<int64_t, int64_t>>;

Tally tally_carved(const std::vector<CarvedBuffer>& carved) {
  Tally t;
  for (const CarvedBuffer& b : carved) {
    auto& [count, bytes] = t[b.name];
    if (count > 0) {
      EXPECT_EQ(bytes, b.bytes) << b.name << " carved with two sizes";
    }
    ++count;
    bytes = b.bytes;
  }
  return t;
}

Tally tally_list(const std::vector<ActBuffer>& list) {
  Tally t;
  for (const ActBuffer& b : list) {
    EXPECT_EQ(t.count(b.name), 0u) << b.name << " listed twice";
    if (b.count > 0) t[b.name] = {b.count, b.bytes()};
  }
  return t;
}

void expect_same(const Tally& carved, const Tally& listed, const std::string& what) {
  for (const auto& [name, cb] : carved) {
    const auto it = listed.find(name);
    if (it == listed.end()) {
      ADD_FAILURE() << what << ": carved " << name << " is not in the list";
      continue;
    }
    EXPECT_EQ(cb.first, it->second.first) << what << ": buffers of " << name;
    EXPECT_EQ(cb.second, it->second.second) << what << ": bytes of one " << name;
  }
  for (const auto& [name, lb] : listed)
    EXPECT_EQ(carved.count(name), 1u) << what << ": listed " << name << " was not carved";
}

TEST(ActivationList, AllocatorCarvesExactlyTheListForEachRecomputeMode) {
  const int64_t B = 3, T = 13;  // odd sizes: per-buffer 64-byte rounding shows
  const std::vector<Case> cases = {
      {"none"},
      {"mlp"},
      {"block"},
      {"none", "embed.*,block.0.*,block.1.*", 2},
      {"mlp", "embed.*,block.0.*", 1},
      {"block", "embed.*,block.0.*", 1},
      {"none", "", 0, 4, 0.0},
      {"mlp", "", 0, 4, 0.1},
      {"none", "", 0, 0, 0.0, DType::kF64},
      {"block", "", 0, 0, 0.0, DType::kF64},
      // A configured MLP width, wider and narrower than C (the dropped adapter input is the
      // wider of C and F).
      {"none", "", 0, 4, 0.1, DType::kF32, 40},
      {"mlp", "", 0, 4, 0.1, DType::kF32, 12},
      // MLP variants (SwiGLU keeps its gate's output too) and the untied head, frozen blocks and
      // adapters included.
      {"none", "", 0, 4, 0.1, DType::kF32, 40, "swiglu", false},
      {"mlp", "embed.*,block.0.*", 1, 0, 0.0, DType::kF32, 0, "swiglu", false},
      {"block", "", 0, 0, 0.0, DType::kF64, 12, "swiglu"},
      {"mlp", "", 0, 4, 0.0, DType::kF32, 0, "relu2", false},
      // Attention variants: the narrower qkv of grouped-query attention (24 + 2 x 1 x 6), the
      // QK-norm statistics, no position table; with adapters on qkv, recompute, fp64, freezing.
      {"none", "", 0, 4, 0.1, DType::kF32, 0, "gelu", true, 1, true, true},
      {"block", "", 0, 0, 0.0, DType::kF64, 0, "gelu", true, 2, true, true},
      {"mlp", "embed.*,block.0.*", 1, 0, 0.0, DType::kF32, 0, "gelu", true, 2, true, true},
      // model.norm = rmsnorm: no mean buffers (ln1_mean, ln2_mean, lnf_mean).
      {"none", "", 0, 0, 0.0, DType::kF32, 0, "gelu", true, 0, false, false, "rmsnorm"},
      {"block", "embed.*,block.0.*", 1, 0, 0.0, DType::kF32, 0, "gelu", true, 0, false, false,
       "rmsnorm"},
      {"mlp", "", 0, 4, 0.1, DType::kF64, 0, "gelu", true, 0, false, false, "rmsnorm"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(describe(c));
    const ModelConfig cfg = config_of(c);
    ParamTable table = param_table_build(cfg);
    if (*c.freeze != '\0') param_table_freeze(&table, c.freeze);
    auto be = backend_create_cpu(1);
    const int64_t act0 = be->tracker().usage(MemTag::kActivations).current;
    GptModel model(cfg, table, *be, c.dtype, c.dtype, c.dtype);
    model.plan(B, T);

    const ActivationSpec spec =
        activation_spec(cfg, B, T, recompute_parse(c.recompute), c.untrained, c.dtype);
    const std::vector<ActBuffer> saved = saved_activations(spec);
    const std::vector<ActBuffer> scratch = model_scratch(spec);
    if (std::string(c.norm) == "rmsnorm") {
      for (const ActBuffer& b : saved) {
        EXPECT_EQ(b.name.find("_mean"), std::string::npos) << b.name;
      }
    }
    expect_same(tally_carved(model.carved_activations()), tally_list(saved), "arena");
    expect_same(tally_carved(model.carved_scratch()), tally_list(scratch), "scratch");
    EXPECT_EQ(model.activation_bytes(), act_list_bytes(saved));
    EXPECT_EQ(model.workspace_bytes(), act_list_bytes(scratch));
    // The tracked allocation is the list's sum: what the planner predicts for this tag.
    EXPECT_EQ(be->tracker().usage(MemTag::kActivations).current - act0, act_list_bytes(saved));
  }
}

// What each recompute mode keeps of a block, counted from the list: every block its own buffers
// (none), one shared MLP hidden pair (mlp), one shared block (block); the residual stream always.
TEST(ActivationList, RecomputeModesKeepTheDocumentedBuffers) {
  ModelConfig cfg = config_of({"none"});
  const int64_t L = cfg.n_layer;
  auto count_of = [&](Recompute r, const std::string& name) {
    for (const ActBuffer& b : saved_activations(activation_spec(cfg, 2, 8, r, 0, DType::kF32)))
      if (b.name == name) return b.count;
    ADD_FAILURE() << "no " << name;
    return int64_t{-1};
  };
  for (Recompute r : {Recompute::kNone, Recompute::kMlp, Recompute::kBlock}) {
    EXPECT_EQ(count_of(r, "residual"), L + 1) << recompute_name(r);
    EXPECT_EQ(count_of(r, "head.logits"), 1) << recompute_name(r);
  }
  EXPECT_EQ(count_of(Recompute::kNone, "block.qkv"), L);
  EXPECT_EQ(count_of(Recompute::kNone, "block.fch"), L);
  EXPECT_EQ(count_of(Recompute::kMlp, "block.qkv"), L);
  EXPECT_EQ(count_of(Recompute::kMlp, "block.fch"), 1);
  EXPECT_EQ(count_of(Recompute::kBlock, "block.qkv"), 1);
  EXPECT_EQ(count_of(Recompute::kBlock, "block.fch_gelu"), 1);
  // The MLP's buffers take the width from ModelConfig::ffn_width (4 C, or model.ffn_hidden).
  for (int64_t ffn_hidden : {int64_t{0}, int64_t{40}}) {
    cfg.ffn_hidden = ffn_hidden;
    for (const ActBuffer& b :
         saved_activations(activation_spec(cfg, 2, 8, Recompute::kNone, 0, DType::kF32)))
      if (b.name == "block.fch") {
        EXPECT_EQ(b.elements, 2 * 8 * cfg.ffn_width());
      }
  }
  // SwiGLU keeps one more buffer of width F, as fch is kept: per block, or one shared copy.
  cfg.mlp = "swiglu";
  EXPECT_EQ(count_of(Recompute::kNone, "block.fch_gate"), L);
  EXPECT_EQ(count_of(Recompute::kMlp, "block.fch_gate"), 1);
  EXPECT_EQ(count_of(Recompute::kBlock, "block.fch_gate"), 1);
  // Grouped-query attention narrows qkv to C + 2 KV hd (here 24 + 2 x 1 x 12); qk_norm keeps one
  // rstd per q and k head and row, in the block's attention part (recomputed with block).
  cfg.mlp = "gelu";
  cfg.ffn_hidden = 0;
  cfg.n_kv_head = 1;
  cfg.qk_norm = true;
  for (const ActBuffer& b :
       saved_activations(activation_spec(cfg, 2, 8, Recompute::kNone, 0, DType::kF32))) {
    if (b.name == "block.qkv") {
      EXPECT_EQ(b.elements, 2 * 8 * (24 + 2 * 12));
    }
    if (b.name == "block.qk_rstd") {
      EXPECT_EQ(b.elements, 2 * 8 * (2 + 1));
      EXPECT_EQ(b.count, L);
    }
  }
  EXPECT_EQ(count_of(Recompute::kBlock, "block.qk_rstd"), 1);
}

}  // namespace
}  // namespace ledgerlm
