// Where each tensor of the GPT lives, resolved from the parameter table once: the sharding unit
// of the embeddings, of every block and of the final norm, and each tensor's offset inside its
// unit (ParamInfo::offset_in_unit). The model and the decoder address weights through these, so
// no step looks a tensor up by name.
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_table.h"

namespace ledgerlm {

// Offsets of one block's tensors from the start of the block's unit.
struct BlockOffsets {
  int64_t ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

struct ModelRefs {
  int embed_unit = 0, final_unit = 0;
  std::vector<int> block_unit;       // per layer
  std::vector<BlockOffsets> blocks;  // per layer
  int64_t wte = 0, wpe = 0;          // in the embedding unit
  int64_t lnfw = 0, lnfb = 0;        // in the final unit
};

// Resolves every tensor of a GPT with `layers` blocks; an internal error if the table lacks one.
ModelRefs model_refs_build(const ParamTable& table, int64_t layers);

// `offsets` shifted by `base` elements (e.g. a unit's offset in the flat buffer).
BlockOffsets block_offsets_shift(const BlockOffsets& offsets, int64_t base);

}  // namespace ledgerlm
