// Resolution of the model's tensors to (unit, offset) (see param_refs.h).
#include "model/param_refs.h"

#include <string>

#include "model/base/check.h"

namespace ledgerlm {

ModelRefs model_refs_build(const ParamTable& table, int64_t layers) {
  auto in_unit = [&](const std::string& name, int unit) {
    const ParamInfo& p = table.find(name);
    LLM_ASSERT(p.unit == unit, "parameter ", name, " is not in unit ", unit);
    return p.offset_in_unit;
  };
  ModelRefs r;
  r.embed_unit = table.find("embed.wte").unit;
  r.final_unit = table.find("final.lnf.weight").unit;
  r.wte = in_unit("embed.wte", r.embed_unit);
  r.wpe = in_unit("embed.wpe", r.embed_unit);
  r.lnfw = in_unit("final.lnf.weight", r.final_unit);
  r.lnfb = in_unit("final.lnf.bias", r.final_unit);
  for (int64_t l = 0; l < layers; ++l) {
    const std::string p = "block." + std::to_string(l) + ".";
    const int u = table.find(p + "ln1.weight").unit;
    r.block_unit.push_back(u);
    r.blocks.push_back({in_unit(p + "ln1.weight", u), in_unit(p + "ln1.bias", u),
                        in_unit(p + "attn.qkv.weight", u), in_unit(p + "attn.qkv.bias", u),
                        in_unit(p + "attn.proj.weight", u), in_unit(p + "attn.proj.bias", u),
                        in_unit(p + "ln2.weight", u), in_unit(p + "ln2.bias", u),
                        in_unit(p + "mlp.fc.weight", u), in_unit(p + "mlp.fc.bias", u),
                        in_unit(p + "mlp.proj.weight", u), in_unit(p + "mlp.proj.bias", u)});
  }
  return r;
}

BlockOffsets block_offsets_shift(const BlockOffsets& o, int64_t base) {
  return {o.ln1w + base,  o.ln1b + base,  o.qkvw + base,    o.qkvb + base,
          o.projw + base, o.projb + base, o.ln2w + base,    o.ln2b + base,
          o.fcw + base,   o.fcb + base,   o.fcprojw + base, o.fcprojb + base};
}

}  // namespace ledgerlm
