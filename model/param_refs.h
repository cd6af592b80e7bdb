// Where each tensor of the GPT lives, resolved from the parameter table once: the sharding unit
// of the embeddings, of every block and of the final norm, and each tensor's offset inside its
// unit (ParamInfo::offset_in_unit). The model and the decoder address weights through these, so
// no step looks a tensor up by name.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "model/block_recipe.h"
#include "model/param_table.h"

namespace ledgerlm {

// Offsets of one block's tensors from the start of the block's unit, by BlockRole
// (block_recipe.h); -1 for a role the configuration does not have (TensorRole::present).
using BlockOffsets = std::array<int64_t, kBlockRoles>;

// A linear layer's adapter factors (LoRA): offsets of A (rank, in) and B (out, rank) in their
// unit's part; a < 0: the layer has no adapter.
struct LoraRef {
  int64_t a = -1, b = -1;
  // The weight's rows it adapts: [row0, row0 + rows) (q, k, v: a row block of the fused qkv).
  int64_t row0 = 0, rows = 0;
  bool a_frozen = false, b_frozen = false;
  bool present() const { return a >= 0; }
};

struct ModelRefs {
  int embed_unit = 0, final_unit = 0;
  std::vector<int> block_unit;       // per layer
  std::vector<BlockOffsets> blocks;  // per layer
  int64_t wte = 0, wpe = 0;          // in the embedding unit (wpe: -1 with rotary positions)
  int64_t lnfw = 0, lnfb = 0;        // in the final unit; -1 when absent (model.norm_weight, bias)
  int64_t lm_head = -1;              // the untied head, in the final unit; -1: tied to wte
  // With frozen tensors (train.freeze, [lora]) the offsets above are inside each unit's trained
  // part or its frozen part (param_table_part), as these masks say.
  std::vector<uint32_t> block_frozen;                 // per layer, bit k: BlockRole k is frozen
  std::vector<std::array<LoraRef, kLoraSites>> lora;  // per layer
  int64_t lora_rank = 0;
  bool wte_frozen = false, wpe_frozen = false, lnfw_frozen = false, lnfb_frozen = false;
  bool lm_head_frozen = false;
  // The lowest block with a trained tensor (layers below it need no backward); n_layer when none
  // is; -1 when an embedding is trained (backward reaches the embeddings).
  int64_t lowest_trained_layer = -1;
  bool any_frozen = false;
};

// Resolves every tensor of `config`'s model (its recipe, config.n_layer blocks); an internal error
// if the table lacks one. A table with frozen rows resolves into its trained and frozen parts
// (param_table_part with the table's block, one rank: offsets inside a unit do not depend on the
// world size).
ModelRefs model_refs_build(const ParamTable& table, const ModelConfig& config);

// `offsets` shifted by `base` elements (e.g. a unit's offset in the flat buffer); absent roles
// stay -1.
BlockOffsets block_offsets_shift(const BlockOffsets& offsets, int64_t base);

}  // namespace ledgerlm
