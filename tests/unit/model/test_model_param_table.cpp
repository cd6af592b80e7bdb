// Parameter-table consistency: every tensor inside its unit, block-aligned, no overlaps, sizes
// and counts right, small tensors grouped, padding to world x block, and the layout inside a
// unit independent of the world size (so checkpoints and 8-bit blocks never depend on it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "model/param_table.h"

namespace ledgerlm {
namespace {

ModelConfig gpt_config() {
  ModelConfig c;
  c.vocab_size = 1000;  // padded to 1024
  c.n_layer = 3;
  c.n_head = 4;
  c.n_embd = 64;
  c.block_size = 32;
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
