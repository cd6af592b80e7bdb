// Resolution of the model's tensors to (unit, offset) (see param_refs.h).
#include "model/param_refs.h"

#include <string>

#include "model/base/check.h"

namespace ledgerlm {

ModelRefs model_refs_build(const ParamTable& table, const ModelConfig& config) {
  const int64_t layers = config.n_layer;
  ParamTableOptions one_rank = table.options;
  one_rank.world = 1;
  const ParamTable trained = param_table_part(table, true, one_rank);
  const ParamTable frozen = param_table_part(table, false, one_rank);
  // Offset of a row inside its unit's part.
  std::vector<int64_t> part_offset(table.params.size(), 0);
  for (const ParamTable* part : {&trained, &frozen})
    for (const ParamInfo& p : part->params)
      part_offset[static_cast<size_t>(p.full_index)] = p.offset_in_unit;
  auto in_unit = [&](const std::string& name, int unit) {
    const ParamInfo& p = table.find(name);
    LLM_ASSERT(p.unit == unit, "parameter ", name, " is not in unit ", unit);
    return part_offset[static_cast<size_t>(table.index_of(name))];
  };
  auto is_frozen = [&](const std::string& name) { return !table.find(name).trainable; };
  // A role the variant does not have (TensorRole::present) has offset -1 and is never frozen.
  constexpr int64_t kAbsent = -1;
  const BlockRecipe recipe = block_recipe(config);
  const bool has_wpe = recipe.has_wpe();
  const std::string wte = recipe_embed_name(recipe.embed[kRoleWte]),
                    wpe = has_wpe ? recipe_embed_name(recipe.embed[kRoleWpe]) : "",
                    lnfw = recipe_final_name(recipe.final[kRoleLnfWeight]),
                    lnfb = recipe_final_name(recipe.final[kRoleLnfBias]);
  ModelRefs r;
  r.any_frozen = !frozen.params.empty();
  r.lora_rank = 0;
  r.embed_unit = table.find(wte).unit;
  r.final_unit = static_cast<int>(table.units.size()) - 1;  // the last unit (param_table.h)
  r.wte = in_unit(wte, r.embed_unit);
  r.wpe = has_wpe ? in_unit(wpe, r.embed_unit) : -1;
  const bool has_lnfw = recipe.final[kRoleLnfWeight].present,
             has_lnfb = recipe.final[kRoleLnfBias].present;
  r.lnfw = has_lnfw ? in_unit(lnfw, r.final_unit) : kAbsent;
  r.lnfb = has_lnfb ? in_unit(lnfb, r.final_unit) : kAbsent;
  r.wte_frozen = is_frozen(wte);
  r.wpe_frozen = has_wpe ? is_frozen(wpe) : r.wte_frozen;  // none: as wte for "all frozen"
  r.lnfw_frozen = has_lnfw && is_frozen(lnfw);
  r.lnfb_frozen = has_lnfb && is_frozen(lnfb);
  if (recipe.final[kRoleLmHead].present) {
    const std::string head = recipe_final_name(recipe.final[kRoleLmHead]);
    r.lm_head = in_unit(head, r.final_unit);
    r.lm_head_frozen = is_frozen(head);
  }
  r.lowest_trained_layer = r.wte_frozen && r.wpe_frozen ? layers : -1;
  static_assert(kBlockRoles <= 32, "a block's frozen mask holds one bit per role");
  for (int64_t l = 0; l < layers; ++l) {
    const int u = table.find(recipe_block_name(recipe.block[kRoleQkvWeight], l)).unit;
    r.block_unit.push_back(u);
    BlockOffsets at{};
    uint32_t mask = 0;
    bool trains = false;
    for (int k = 0; k < kBlockRoles; ++k) {
      const TensorRole& role = recipe.block[static_cast<size_t>(k)];
      at[static_cast<size_t>(k)] = kAbsent;
      if (!role.present) continue;
      const std::string name = recipe_block_name(role, l);
      at[static_cast<size_t>(k)] = in_unit(name, u);
      if (is_frozen(name))
        mask |= 1u << k;
      else
        trains = true;
    }
    r.blocks.push_back(at);
    r.block_frozen.push_back(mask);
    std::array<LoraRef, kLoraSites> lora{};
    for (int s = 0; s < kLoraSites; ++s) {
      const std::string stem = "block." + std::to_string(l) + "." + recipe.lora_sites[s].stem;
      const std::string a = stem + ".lora_a", b = stem + ".lora_b";
      if (table.index_of(a) < 0) continue;
      const ParamInfo& fb = table.find(b);
      lora[s] = {in_unit(a, u), in_unit(b, u), fb.lora_row0,
                 fb.shape[0],   is_frozen(a),  is_frozen(b)};
      r.lora_rank = table.find(a).shape[0];
      trains = trains || !is_frozen(a) || !is_frozen(b);
    }
    r.lora.push_back(lora);
    if (r.lowest_trained_layer == layers && trains) r.lowest_trained_layer = l;
  }
  return r;
}

BlockOffsets block_offsets_shift(const BlockOffsets& o, int64_t base) {
  BlockOffsets out = o;
  for (int64_t& x : out)
    if (x >= 0) x += base;  // absent roles stay -1
  return out;
}

}  // namespace ledgerlm
