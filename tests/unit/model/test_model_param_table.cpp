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

}  // namespace
}  // namespace ledgerlm
