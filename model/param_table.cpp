// Builds the GPT-2 parameter table and its flat layout (see param_table.h).
#include "model/param_table.h"

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
};

}  // namespace

ParamTable param_table_build(const ModelConfig& cfg, const ParamTableOptions& options) {
  LLM_REQUIRE(options.block > 0 && options.world > 0, "param table: block and world must be > 0");
  ParamTable t;
  t.options = options;
  const int64_t C = cfg.n_embd, L = cfg.n_layer, Vp = cfg.padded_vocab();
  const double std = 0.02, proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(L));
  Builder b{&t, cfg};

  t.units.push_back({"embed", 0, 0, 0, {}});
  b.add(0, "embed.wte", {Vp, C}, ParamKind::kEmbedding, InitKind::kNormal, std,
        "transformer.wte.weight", false);
  t.params.back().hf_rows = cfg.vocab_size;
  b.add(0, "embed.wpe", {cfg.block_size, C}, ParamKind::kEmbedding, InitKind::kNormal, std,
        "transformer.wpe.weight", false);

  for (int64_t l = 0; l < L; ++l) {
    int u = static_cast<int>(t.units.size());
    std::string p = "block." + std::to_string(l) + ".";
    std::string h = "transformer.h." + std::to_string(l) + ".";
    t.units.push_back({"block." + std::to_string(l), 0, 0, 0, {}});
    b.add(u, p + "ln1.weight", {C}, ParamKind::kNormWeight, InitKind::kOnes, 0, h + "ln_1.weight",
          false);
    b.add(u, p + "ln1.bias", {C}, ParamKind::kBias, InitKind::kZeros, 0, h + "ln_1.bias", false);
    b.add(u, p + "attn.qkv.weight", {3 * C, C}, ParamKind::kMatrix, InitKind::kNormal, std,
          h + "attn.c_attn.weight", true);
    t.params.back().split = 3;  // q, k and v
    b.add(u, p + "attn.qkv.bias", {3 * C}, ParamKind::kBias, InitKind::kZeros, 0,
          h + "attn.c_attn.bias", false);
    b.add(u, p + "attn.proj.weight", {C, C}, ParamKind::kMatrix, InitKind::kNormal, proj_std,
          h + "attn.c_proj.weight", true);
    b.add(u, p + "attn.proj.bias", {C}, ParamKind::kBias, InitKind::kZeros, 0,
          h + "attn.c_proj.bias", false);
    b.add(u, p + "ln2.weight", {C}, ParamKind::kNormWeight, InitKind::kOnes, 0, h + "ln_2.weight",
          false);
    b.add(u, p + "ln2.bias", {C}, ParamKind::kBias, InitKind::kZeros, 0, h + "ln_2.bias", false);
    b.add(u, p + "mlp.fc.weight", {4 * C, C}, ParamKind::kMatrix, InitKind::kNormal, std,
          h + "mlp.c_fc.weight", true);
    b.add(u, p + "mlp.fc.bias", {4 * C}, ParamKind::kBias, InitKind::kZeros, 0, h + "mlp.c_fc.bias",
          false);
    b.add(u, p + "mlp.proj.weight", {C, 4 * C}, ParamKind::kMatrix, InitKind::kNormal, proj_std,
          h + "mlp.c_proj.weight", true);
    b.add(u, p + "mlp.proj.bias", {C}, ParamKind::kBias, InitKind::kZeros, 0, h + "mlp.c_proj.bias",
          false);
  }

  int uf = static_cast<int>(t.units.size());
  t.units.push_back({"final", 0, 0, 0, {}});
  b.add(uf, "final.lnf.weight", {C}, ParamKind::kNormWeight, InitKind::kOnes, 0,
        "transformer.ln_f.weight", false);
  b.add(uf, "final.lnf.bias", {C}, ParamKind::kBias, InitKind::kZeros, 0, "transformer.ln_f.bias",
        false);

  // Layout: inside each unit, large tensors first (in table order), then the small ones grouped.
  int64_t base = 0, logical = 0;
  for (auto& unit : t.units) {
    std::vector<int> order = unit.params;
    std::stable_partition(order.begin(), order.end(),
                          [&](int i) { return t.params[i].numel >= kSmallTensor; });
    int64_t cursor = 0;
    for (int i : order) {
      t.params[i].offset_in_unit = cursor;
      cursor = round_up(cursor + t.params[i].numel, options.block);
    }
    unit.used = cursor;
    unit.size = round_up(cursor, options.block * options.world);
    unit.offset = base;
    unit.logical_offset = logical;
    for (int i : order) t.params[i].offset = base + t.params[i].offset_in_unit;
    base += unit.size;
    logical += round_up(cursor, options.block);
  }
  t.total = base;
  t.logical_total = logical;
  for (const auto& p : t.params) t.num_params += p.numel;
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
