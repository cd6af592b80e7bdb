// Builds the parameter table from the block recipe, and its flat layout (see param_table.h).
#include "model/param_table.h"

#include <fnmatch.h>
#include <algorithm>

#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

struct Builder {
  ParamTable* table;
  const ModelConfig& cfg;

  void add(int unit, const std::string& name, std::vector<int64_t> shape, ParamKind kind,
           InitKind init, double std, const std::string& hf_name, bool hf_transpose) {
    ParamInfo p;
    p.name = name;
    p.shape = std::move(shape);
    p.kind = kind;
    p.unit = unit;
    p.numel = 1;
    for (int64_t d : p.shape) p.numel *= d;
    p.init = init;
    p.init_std = std;
    p.hf_name = hf_name;
    p.hf_transpose = hf_transpose;
    p.hf_rows = p.shape[0];
    table->units[unit].params.push_back(static_cast<int>(table->params.size()));
    table->params.push_back(std::move(p));
  }

  // Adapter factors of the linear weight `base`: A (rank, in) drawn like PEFT's default
  // (Kaiming-uniform over `in` has std 1/sqrt(3 in)), B (out, rank) zero, so training starts
  // at the base model exactly.
  // `stem` names them ("block.0.attn.q"); they adapt rows [row0, row0 + out) of the weight.
  void add_lora(int base, const std::string& stem, int64_t row0, int64_t out) {
    const ParamInfo w = table->params[static_cast<size_t>(base)];
    const int64_t in = w.shape[1], r = cfg.lora.rank;
    add(w.unit, stem + ".lora_a", {r, in}, ParamKind::kMatrix, InitKind::kNormal,
        1.0 / std::sqrt(3.0 * static_cast<double>(in)), "", false);
    table->params.back().lora = ParamInfo::Lora::kA;
    table->params.back().lora_base = base;
    table->params.back().lora_row0 = row0;
    add(w.unit, stem + ".lora_b", {out, r}, ParamKind::kMatrix, InitKind::kZeros, 0, "", false);
    table->params.back().lora = ParamInfo::Lora::kB;
    table->params.back().lora_base = base;
    table->params.back().lora_row0 = row0;
  }
};

// Lays out every unit: inside a unit large tensors first (in table order), then the small ones
// grouped; each starts at a multiple of options.block; units padded to world x block.
void layout_units(ParamTable* t) {
  const ParamTableOptions& options = t->options;
  int64_t base = 0, logical = 0;
  for (auto& unit : t->units) {
    std::vector<int> order = unit.params;
    std::stable_partition(order.begin(), order.end(),
                          [&](int i) { return t->params[i].numel >= kSmallTensor; });
    int64_t cursor = 0;
    for (int i : order) {
      t->params[i].offset_in_unit = cursor;
      cursor = round_up(cursor + t->params[i].numel, options.block);
    }
    unit.used = cursor;
    unit.size = round_up(cursor, options.block * options.world);
    unit.offset = base;
    unit.logical_offset = logical;
    for (int i : order) t->params[i].offset = base + t->params[i].offset_in_unit;
    base += unit.size;
    logical += round_up(cursor, options.block);
  }
  t->total = base;
  t->logical_total = logical;
  t->num_params = 0;
  for (const auto& p : t->params) t->num_params += p.numel;
}

}  // namespace

ParamTable param_table_build(const ModelConfig& cfg, const ParamTableOptions& options) {
  LLM_REQUIRE(options.block > 0 && options.world > 0, "param table: block and world must be > 0");
  ParamTable t;
  t.options = options;
  const BlockRecipe recipe = block_recipe(cfg);
  const int64_t L = cfg.n_layer;
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
  Builder b{&t, cfg};
  // One unit's tensors from its roles; `name` and `hf` make a role's table and HF names.
  auto add_unit = [&](const std::string& unit_name, const std::vector<TensorRole>& roles, auto name,
                      auto hf) {
    const int u = static_cast<int>(t.units.size());
    t.units.push_back({unit_name, 0, 0, 0, {}});
    for (const TensorRole& r : roles) {
      if (!r.present) continue;  // a variant without this tensor (block_recipe.h)
      const double s =
          r.scale == InitScale::kBase ? std : (r.scale == InitScale::kResidual ? proj_std : 0.0);
      b.add(u, name(r), recipe_shape(recipe.sizes, r), r.kind, r.init, s, hf(r), r.hf_transpose);
      t.params.back().split = r.split;
      if (r.hf_real_vocab_rows) t.params.back().hf_rows = cfg.vocab_size;
    }
  };
  add_unit("embed", recipe.embed, recipe_embed_name, recipe_unit_hf_name);
  for (int64_t l = 0; l < L; ++l)
    add_unit(
        "block." + std::to_string(l), recipe.block,
        [l](const TensorRole& r) { return recipe_block_name(r, l); },
        [l](const TensorRole& r) { return recipe_block_hf_name(r, l); });
  add_unit("final", recipe.final, recipe_final_name, recipe_unit_hf_name);

  if (cfg.lora.enabled()) {
    // The adapted weights (lora.targets), block by block in site order; appended after every
    // base tensor, so the base tensors keep their table indices.
    const size_t base_count = t.params.size();
    for (int64_t l = 0; l < L; ++l)
      for (int site = 0; site < kLoraSites; ++site) {
        if (!cfg.lora.targets_layer(lora_target_name(site))) continue;
        const LoraSiteRecipe& s = recipe.lora_sites[site];
        const TensorRole& r = recipe.block[static_cast<size_t>(s.role)];
        const LoraRows rows = recipe_lora_rows(recipe, site);
        b.add_lora(t.index_of(recipe_block_name(r, l)), "block." + std::to_string(l) + "." + s.stem,
                   rows.row0, rows.rows);
      }
    for (size_t i = 0; i < base_count; ++i) t.params[i].trainable = false;
  }
  layout_units(&t);
  return t;
}

const ParamInfo& ParamTable::find(const std::string& name) const {
  int i = index_of(name);
  LLM_REQUIRE(i >= 0, "no parameter named '", name, "'");
  return params[i];
}

int ParamTable::index_of(const std::string& name) const {
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].name == name) return static_cast<int>(i);
  return -1;
}

}  // namespace ledgerlm

namespace ledgerlm {

bool glob_match(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;  // POSIX shell globs: * ? [...]
}

void param_table_freeze(ParamTable* table, const std::string& patterns) {
  size_t start = 0;
  while (start < patterns.size()) {
    size_t end = patterns.find(',', start);
    if (end == std::string::npos) end = patterns.size();
    std::string pat = patterns.substr(start, end - start);
    const size_t a = pat.find_first_not_of(" \t"), b = pat.find_last_not_of(" \t");
    pat = a == std::string::npos ? "" : pat.substr(a, b - a + 1);
    start = end + 1;
    if (pat.empty()) continue;
    bool matched = false;
    for (ParamInfo& p : table->params) {
      if (glob_match(pat, p.name) || (!p.hf_name.empty() && glob_match(pat, p.hf_name))) {
        p.trainable = false;
        matched = true;
      }
    }
    LLM_REQUIRE(matched, "train.freeze: pattern '", pat,
                "' matches no parameter (names as `ledgerlm memory --tensors` lists them, e.g. "
                "embed.wte, block.0.attn.qkv.weight, or their Hugging Face names)");
  }
  bool any = false;
  for (const ParamInfo& p : table->params) any = any || p.trainable;
  LLM_REQUIRE(any, "train.freeze: every parameter is frozen; nothing would train");
}

ParamTable param_table_part(const ParamTable& full, bool trainable,
                            const ParamTableOptions& options) {
  ParamTable t;
  t.options = options;
  for (const UnitInfo& u : full.units) t.units.push_back({u.name, 0, 0, 0, {}, 0});
  for (size_t i = 0; i < full.params.size(); ++i) {
    if (full.params[i].trainable != trainable) continue;
    ParamInfo p = full.params[i];
    p.full_index = static_cast<int>(i);
    p.lora_base = -1;  // an index into `full`, meaningless here
    t.units[static_cast<size_t>(p.unit)].params.push_back(static_cast<int>(t.params.size()));
    t.params.push_back(std::move(p));
  }
  layout_units(&t);
  return t;
}

bool param_table_has_frozen(const ParamTable& table) {
  for (const ParamInfo& p : table.params)
    if (!p.trainable) return true;
  return false;
}

}  // namespace ledgerlm
