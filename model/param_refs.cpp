// Resolution of the model's tensors to (unit, offset) (see param_refs.h).
#include "model/param_refs.h"

#include <string>

#include "model/base/check.h"

namespace ledgerlm {

ModelRefs model_refs_build(const ParamTable& table, int64_t layers) {
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
  ModelRefs r;
  r.any_frozen = !frozen.params.empty();
  r.lora_rank = 0;
  r.embed_unit = table.find("embed.wte").unit;
  r.final_unit = table.find("final.lnf.weight").unit;
  r.wte = in_unit("embed.wte", r.embed_unit);
  r.wpe = in_unit("embed.wpe", r.embed_unit);
  r.lnfw = in_unit("final.lnf.weight", r.final_unit);
  r.lnfb = in_unit("final.lnf.bias", r.final_unit);
  r.wte_frozen = is_frozen("embed.wte");
  r.wpe_frozen = is_frozen("embed.wpe");
  r.lnfw_frozen = is_frozen("final.lnf.weight");
  r.lnfb_frozen = is_frozen("final.lnf.bias");
  r.lowest_trained_layer = r.wte_frozen && r.wpe_frozen ? layers : -1;
  static const char* kFields[] = {"ln1.weight",    "ln1.bias",         "attn.qkv.weight",
                                  "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
                                  "ln2.weight",    "ln2.bias",         "mlp.fc.weight",
                                  "mlp.fc.bias",   "mlp.proj.weight",  "mlp.proj.bias"};
  static const char* kLoraStems[] = {"attn.qkv", "attn.proj", "mlp.fc", "mlp.proj"};
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "block." + std::to_string(l) + ".";
    const int u = table.find(p + "ln1.weight").unit;
    r.block_unit.push_back(u);
    int64_t at[12];
    uint32_t mask = 0;
    for (int k = 0; k < 12; ++k) {
      at[k] = in_unit(p + kFields[k], u);
      if (is_frozen(p + kFields[k])) mask |= 1u << k;
    }
    r.blocks.push_back(
        {at[0], at[1], at[2], at[3], at[4], at[5], at[6], at[7], at[8], at[9], at[10], at[11]});
    r.block_frozen.push_back(mask);
    bool trains = mask != (1u << 12) - 1;
    std::array<LoraRef, kLoraSites> lora{};
    for (int s = 0; s < kLoraSites; ++s) {
      const std::string a = p + kLoraStems[s] + ".lora_a", b = p + kLoraStems[s] + ".lora_b";
      if (table.index_of(a) < 0) continue;
      lora[s] = {in_unit(a, u), in_unit(b, u), is_frozen(a), is_frozen(b)};
      r.lora_rank = table.find(a).shape[0];
      trains = trains || !is_frozen(a) || !is_frozen(b);
    }
    r.lora.push_back(lora);
    if (r.lowest_trained_layer == layers && trains) r.lowest_trained_layer = l;
  }
  return r;
}

BlockOffsets block_offsets_shift(const BlockOffsets& o, int64_t base) {
  return {o.ln1w + base,  o.ln1b + base,  o.qkvw + base,    o.qkvb + base,
          o.projw + base, o.projb + base, o.ln2w + base,    o.ln2b + base,
          o.fcw + base,   o.fcb + base,   o.fcprojw + base, o.fcprojb + base};
}

}  // namespace ledgerlm
