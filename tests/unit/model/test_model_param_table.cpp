// Parameter-table consistency: every tensor inside its unit, block-aligned, no overlaps, sizes
// and counts right, small tensors grouped, padding to world x block, and the layout inside a
// unit independent of the world size (so checkpoints and 8-bit blocks never depend on it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/base/check.h"
#include "model/param_table.h"
#include "tests/support/config_test_support.h"

namespace ledgerlm {
namespace {

ModelConfig gpt_config() {
  // vocab 1000 padded to 1024
  ModelConfig c = testing::model_config_of({.vocab = 1000, .L = 3, .H = 4, .C = 64, .block = 32});
  return c;
}

TEST(ParamTable, LayoutIsAlignedDisjointAndComplete) {
  const ModelConfig c = gpt_config();
  for (int64_t world : {1, 2, 8}) {
    ParamTableOptions o;
    o.world = world;
    ParamTable t = param_table_build(c, o);
    ASSERT_EQ(t.units.size(), static_cast<size_t>(c.n_layer + 2));
    EXPECT_EQ(t.params.size(), static_cast<size_t>(2 + 12 * c.n_layer + 2));
    const int64_t C = c.n_embd, L = c.n_layer;
    const int64_t expected = 1024 * C + c.block_size * C + L * (12 * C * C + 13 * C) + 2 * C;
    EXPECT_EQ(t.num_params, expected);
    std::set<std::string> names;
    int64_t unit_end = 0;
    for (size_t u = 0; u < t.units.size(); ++u) {
      const UnitInfo& unit = t.units[u];
      EXPECT_EQ(unit.offset, unit_end) << "units are contiguous";
      EXPECT_EQ(unit.size % (o.block * world), 0) << unit.name;
      EXPECT_GE(unit.size, unit.used);
      unit_end = unit.offset + unit.size;
      std::vector<std::pair<int64_t, int64_t>> spans;
      bool seen_small = false;
      // In layout order, big tensors come before the grouped small ones.
      std::vector<int> order = unit.params;
      std::sort(order.begin(), order.end(),
                [&](int a, int b) { return t.params[a].offset < t.params[b].offset; });
      for (int i : order) {
        const ParamInfo& p = t.params[i];
        EXPECT_TRUE(names.insert(p.name).second) << "duplicate " << p.name;
        EXPECT_EQ(p.unit, static_cast<int>(u));
        EXPECT_EQ(p.offset % o.block, 0) << p.name << " not block-aligned";
        EXPECT_EQ(p.offset, unit.offset + p.offset_in_unit);
        int64_t numel = 1;
        for (int64_t d : p.shape) numel *= d;
        EXPECT_EQ(numel, p.numel) << p.name;
        EXPECT_LE(p.offset_in_unit + p.numel, unit.used) << p.name << " leaves its unit";
        spans.push_back({p.offset, p.offset + p.numel});
        bool small = p.numel < kSmallTensor;
        EXPECT_FALSE(seen_small && !small) << p.name << ": small tensors must be grouped last";
        seen_small = seen_small || small;
      }
      std::sort(spans.begin(), spans.end());
      for (size_t k = 1; k < spans.size(); ++k)
        EXPECT_LE(spans[k - 1].second, spans[k].first) << "overlap in unit " << unit.name;
    }
    EXPECT_EQ(t.total, unit_end);
  }
}

TEST(ParamTable, OffsetsInsideUnitsDoNotDependOnWorld) {
  ParamTableOptions one, eight;
  eight.world = 8;
  ParamTable a = param_table_build(gpt_config(), one), b = param_table_build(gpt_config(), eight);
  for (size_t i = 0; i < a.params.size(); ++i)
    EXPECT_EQ(a.params[i].offset_in_unit, b.params[i].offset_in_unit) << a.params[i].name;
}

TEST(ParamTable, KindsInitAndExportNames) {
  ParamTable t = param_table_build(gpt_config(), ParamTableOptions{});
  EXPECT_EQ(t.find("embed.wte").kind, ParamKind::kEmbedding);
  EXPECT_EQ(t.find("block.0.attn.qkv.weight").kind, ParamKind::kMatrix);
  EXPECT_EQ(t.find("block.0.attn.qkv.bias").kind, ParamKind::kBias);
  EXPECT_EQ(t.find("block.2.ln2.weight").kind, ParamKind::kNormWeight);
  EXPECT_EQ(t.find("block.1.ln1.weight").init, InitKind::kOnes);
  EXPECT_EQ(t.find("block.1.mlp.fc.bias").init, InitKind::kZeros);
  // Residual projections get 0.02 / sqrt(2 L).
  EXPECT_NEAR(t.find("block.1.attn.proj.weight").init_std, 0.02 / std::sqrt(6.0), 1e-15);
  EXPECT_NEAR(t.find("block.1.mlp.fc.weight").init_std, 0.02, 1e-15);
  EXPECT_EQ(t.find("embed.wte").hf_name, "transformer.wte.weight");
  EXPECT_EQ(t.find("embed.wte").hf_rows, 1000);  // the vocab padding is not exported
  EXPECT_TRUE(t.find("block.0.mlp.fc.weight").hf_transpose);
  EXPECT_EQ(t.find("block.0.mlp.fc.weight").shape, (std::vector<int64_t>{256, 64}));
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// The table the block recipe builds is GPT-2's, row by row as it was spelled out before the
// recipe (names, HF names, shapes, kinds, init, transposes, q/k/v split): the order decides the
// init's random draws and the checkpoint layout, so it must not move.
TEST(ParamTable, RecipeBuildsGpt2RowByRow) {
  ModelConfig c = gpt_config();
  c.n_layer = 2;
  const ParamTable t = param_table_build(c);
  const int64_t C = 64, F = 4 * C;
  const double s = 0.02, r = 0.02 / std::sqrt(4.0);
  struct Row {
    std::string name, hf;
    std::vector<int64_t> shape;
    ParamKind kind;
    InitKind init;
    double std;
    bool transpose;
    int split;
  };
  using K = ParamKind;
  using I = InitKind;
  std::vector<Row> want = {
      {"embed.wte", "transformer.wte.weight", {1024, C}, K::kEmbedding, I::kNormal, s, false, 1},
      {"embed.wpe", "transformer.wpe.weight", {32, C}, K::kEmbedding, I::kNormal, s, false, 1}};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "block." + std::to_string(l) + ".",
                      h = "transformer.h." + std::to_string(l) + ".";
    const std::vector<Row> block = {
        {p + "ln1.weight", h + "ln_1.weight", {C}, K::kNormWeight, I::kOnes, 0, false, 1},
        {p + "ln1.bias", h + "ln_1.bias", {C}, K::kBias, I::kZeros, 0, false, 1},
        {p + "attn.qkv.weight",
         h + "attn.c_attn.weight",
         {3 * C, C},
         K::kMatrix,
         I::kNormal,
         s,
         true,
         3},
        {p + "attn.qkv.bias", h + "attn.c_attn.bias", {3 * C}, K::kBias, I::kZeros, 0, false, 1},
        {p + "attn.proj.weight",
         h + "attn.c_proj.weight",
         {C, C},
         K::kMatrix,
         I::kNormal,
         r,
         true,
         1},
        {p + "attn.proj.bias", h + "attn.c_proj.bias", {C}, K::kBias, I::kZeros, 0, false, 1},
        {p + "ln2.weight", h + "ln_2.weight", {C}, K::kNormWeight, I::kOnes, 0, false, 1},
        {p + "ln2.bias", h + "ln_2.bias", {C}, K::kBias, I::kZeros, 0, false, 1},
        {p + "mlp.fc.weight", h + "mlp.c_fc.weight", {F, C}, K::kMatrix, I::kNormal, s, true, 1},
        {p + "mlp.fc.bias", h + "mlp.c_fc.bias", {F}, K::kBias, I::kZeros, 0, false, 1},
        {p + "mlp.proj.weight",
         h + "mlp.c_proj.weight",
         {C, F},
         K::kMatrix,
         I::kNormal,
         r,
         true,
         1},
        {p + "mlp.proj.bias", h + "mlp.c_proj.bias", {C}, K::kBias, I::kZeros, 0, false, 1}};
    want.insert(want.end(), block.begin(), block.end());
  }
  want.push_back(
      {"final.lnf.weight", "transformer.ln_f.weight", {C}, K::kNormWeight, I::kOnes, 0, false, 1});
  want.push_back(
      {"final.lnf.bias", "transformer.ln_f.bias", {C}, K::kBias, I::kZeros, 0, false, 1});
  ASSERT_EQ(t.params.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const ParamInfo& p = t.params[i];
    const Row& w = want[i];
    EXPECT_EQ(p.name, w.name) << i;
    EXPECT_EQ(p.hf_name, w.hf) << w.name;
    EXPECT_EQ(p.shape, w.shape) << w.name;
    EXPECT_EQ(p.kind, w.kind) << w.name;
    EXPECT_EQ(p.init, w.init) << w.name;
    EXPECT_EQ(p.init_std, w.std) << w.name;  // the same double: the init draws depend on it
    EXPECT_EQ(p.hf_transpose, w.transpose) << w.name;
    EXPECT_EQ(p.split, w.split) << w.name;
    EXPECT_EQ(p.hf_rows, w.name == "embed.wte" ? 1000 : w.shape[0]) << w.name;
  }
}

// model.ffn_hidden sets the MLP's width F: fc (F, C) and its bias (F), proj (C, F); nothing
// else changes.
TEST(ParamTable, FfnHiddenSetsTheMlpWidth) {
  ModelConfig c = gpt_config();
  c.ffn_hidden = 96;
  const ParamTable t = param_table_build(c);
  const int64_t C = c.n_embd, L = c.n_layer, F = 96;
  EXPECT_EQ(t.find("block.2.mlp.fc.weight").shape, (std::vector<int64_t>{F, C}));
  EXPECT_EQ(t.find("block.2.mlp.fc.bias").shape, (std::vector<int64_t>{F}));
  EXPECT_EQ(t.find("block.2.mlp.proj.weight").shape, (std::vector<int64_t>{C, F}));
  EXPECT_EQ(t.find("block.2.attn.qkv.weight").shape, (std::vector<int64_t>{3 * C, C}));
  EXPECT_EQ(t.num_params,
            1024 * C + c.block_size * C + L * (4 * C * C + 2 * C * F + 9 * C + F) + 2 * C);
  // 0 is 4C; a width of 4C given explicitly is the same table.
  c.ffn_hidden = 4 * C;
  EXPECT_EQ(param_table_build(c).total, param_table_build(gpt_config()).total);
  c.ffn_hidden = -1;
  EXPECT_THROW(c.validate(), Error);
}

// model.mlp = swiglu: gate (F, C), up (F, C), down (C, F) and their biases, the gate after the
// block's GPT-2 roles; ffn_hidden = 0 takes Llama's width rule, int(8C / 3) rounded up to a
// multiple of 256. relu2 keeps GPT-2's two matrices. Nothing else changes.
TEST(ParamTable, MlpVariantsBuildTheirMatrices) {
  ModelConfig c = gpt_config();
  const int64_t C = c.n_embd, L = c.n_layer, F = 96;
  c.mlp = "swiglu";
  c.ffn_hidden = F;
  const ParamTable t = param_table_build(c);
  EXPECT_EQ(t.find("block.1.mlp.gate.weight").shape, (std::vector<int64_t>{F, C}));
  EXPECT_EQ(t.find("block.1.mlp.gate.bias").shape, (std::vector<int64_t>{F}));
  EXPECT_EQ(t.find("block.1.mlp.up.weight").shape, (std::vector<int64_t>{F, C}));
  EXPECT_EQ(t.find("block.1.mlp.down.weight").shape, (std::vector<int64_t>{C, F}));
  EXPECT_EQ(t.find("block.1.mlp.gate.weight").kind, ParamKind::kMatrix);  // Muon's, like up
  EXPECT_EQ(t.index_of("block.1.mlp.fc.weight"), -1);
  EXPECT_EQ(t.num_params,
            1024 * C + c.block_size * C + L * (4 * C * C + 3 * C * F + 9 * C + 2 * F) + 2 * C);
  // Llama's rule: C = 64 -> int(170.7) -> 256; C = 576 (SmolLM2-135M) -> 1536; C = 4096 -> 11008.
  c.ffn_hidden = 0;
  EXPECT_EQ(c.ffn_width(), 256);
  EXPECT_EQ(swiglu_default_width(576), 1536);
  EXPECT_EQ(swiglu_default_width(4096), 11008);
  c.mlp = "relu2";
  EXPECT_EQ(param_table_build(c).total, param_table_build(gpt_config()).total);
  EXPECT_EQ(c.ffn_width(), 4 * C);
  c.mlp = "geglu";
  try {
    c.validate();
    ADD_FAILURE() << "model.mlp = geglu accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.mlp: expected gelu, swiglu or relu2"),
              std::string::npos)
        << e.what();
  }
}

// model.tie_embeddings = false: the final unit gains lm_head (padded vocab, C), HF lm_head.weight
// with the real rows, in the embedding group; the defaults' table is unchanged.
TEST(ParamTable, UntiedHeadIsTheFinalUnitsLmHead) {
  ModelConfig c = gpt_config();
  EXPECT_EQ(param_table_build(c).index_of("final.lm_head"), -1);
  c.tie_embeddings = false;
  const ParamTable t = param_table_build(c);
  const ParamInfo& head = t.find("final.lm_head");
  EXPECT_EQ(head.shape, (std::vector<int64_t>{1024, c.n_embd}));
  EXPECT_EQ(head.hf_name, "lm_head.weight");
  EXPECT_EQ(head.hf_rows, 1000);
  EXPECT_EQ(head.kind, ParamKind::kEmbedding);
  EXPECT_EQ(t.units[static_cast<size_t>(head.unit)].name, "final");
  EXPECT_EQ(t.num_params, param_table_build(gpt_config()).num_params + 1024 * c.n_embd);
  c.logit_softcap = -1.0;
  EXPECT_THROW(c.validate(), Error);
}

// Attention variants: rotary positions drop the wpe table; grouped-query attention narrows the
// fused qkv to C + 2 KV hd (here 64 + 2 x 2 x 16 = 128) and its Muon pieces to KV hd rows (q's
// 2 groups, k, v: 4); QK-norm adds no parameter. Bad values are refused naming the key.
TEST(ParamTable, AttentionVariantsShapeTheTable) {
  ModelConfig c = gpt_config();
  const int64_t C = c.n_embd, L = c.n_layer, base = param_table_build(c).num_params;
  c.position = "rope";
  EXPECT_LT(param_table_build(c).index_of("embed.wpe"), 0);
  EXPECT_EQ(param_table_build(c).num_params, base - c.block_size * C);
  c = gpt_config();
  c.n_kv_head = 2;
  c.qk_norm = true;
  const ParamTable t = param_table_build(c);
  EXPECT_EQ(t.find("block.1.attn.qkv.weight").shape, (std::vector<int64_t>{128, C}));
  EXPECT_EQ(t.find("block.1.attn.qkv.bias").shape, (std::vector<int64_t>{128}));
  EXPECT_EQ(t.find("block.1.attn.qkv.weight").split, 4);
  EXPECT_EQ(t.num_params, base - L * (3 * C - 128) * (C + 1));
  c.n_kv_head = 4;  // = n_head: GPT-2's table
  EXPECT_EQ(param_table_build(c).total, param_table_build(gpt_config()).total);
  EXPECT_EQ(param_table_build(c).find("block.0.attn.qkv.weight").split, 3);

  auto refused = [](ModelConfig m, const std::string& key) {
    try {
      m.validate();
      ADD_FAILURE() << key << ": accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  ModelConfig m = gpt_config();
  m.position = "alibi";
  refused(m, "model.position");
  m = gpt_config();
  m.rope_theta = 0.5;
  refused(m, "model.rope_theta");
  m = gpt_config();
  m.n_kv_head = 3;  // does not divide 4
  refused(m, "model.n_kv_head");
  m.n_kv_head = 8;
  refused(m, "model.n_kv_head");
  m = gpt_config();
  m.n_embd = 12;  // head_dim 3: odd
  m.position = "rope";
  refused(m, "model.position");
}

}  // namespace
}  // namespace ledgerlm

namespace ledgerlm {
namespace {

// model.norm: the table holds exactly the tensors the variant has. RMSNorm has no
// bias; norm_weight = false drops the norms' weights; bias = false every linear bias and
// LayerNorm's, except the q, k, v bias with qkv_bias (Qwen2). A final norm with neither tensor
// leaves the final unit empty (size 0).
TEST(ParamTable, NormAndBiasKeysDecideWhichTensorsExist) {
  auto names = [](const ModelConfig& c) {
    std::set<std::string> out;
    for (const ParamInfo& p : param_table_build(c).params) out.insert(p.name);
    return out;
  };
  const std::set<std::string> gpt2 = names(gpt_config());
  ModelConfig qwen = gpt_config();
  qwen.norm = "rmsnorm";
  qwen.bias = false;
  qwen.qkv_bias = true;
  std::set<std::string> want;
  for (const std::string& n : gpt2) {
    const bool is_bias = n.size() > 5 && n.compare(n.size() - 5, 5, ".bias") == 0;
    if (!is_bias || n.find("attn.qkv.bias") != std::string::npos) want.insert(n);
  }
  EXPECT_EQ(names(qwen), want);
  ModelConfig nanochat = qwen;
  nanochat.norm_weight = false;
  nanochat.qkv_bias = false;
  const ParamTable t = param_table_build(nanochat);
  for (const ParamInfo& p : t.params) {
    EXPECT_EQ(p.name.find(".bias"), std::string::npos) << p.name;
    EXPECT_NE(p.kind, ParamKind::kNormWeight) << p.name;
  }
  EXPECT_EQ(t.units.back().name, "final");
  EXPECT_EQ(t.units.back().size, 0);
  // LayerNorm with bias = false: no norm bias either; norm_weight = false alone keeps them.
  ModelConfig ln = gpt_config();
  ln.norm_weight = false;
  for (const std::string& n : gpt2) {
    const bool norm_weight = n.find("ln") != std::string::npos && n.find(".weight") != n.npos;
    EXPECT_EQ(names(ln).count(n), norm_weight ? 0u : 1u) << n;
  }
}

}  // namespace
}  // namespace ledgerlm
