// The parameter table: one row per tensor of the model (model/block_recipe.h lists them), and the
// flat-buffer layout.
//
// Every tensor lives in a sharding unit (embeddings, one per block, final norm). Inside a unit each
// tensor starts at a multiple of `block` elements (the 8-bit quantization block, default 256), so
// quantization blocks never cross tensors; tensors with fewer than kSmallTensor elements are
// grouped at the end of their unit. A unit is padded to a multiple of world x block, so offsets
// inside a unit never depend on world size. Gradients, master weights and optimizer states
// mirror this layout element for element: a shard is a contiguous range.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/block_recipe.h"
#include "model/model_config.h"

namespace ledgerlm {

constexpr int64_t kSmallTensor = 4096;  // fewer elements: kept in fp32 optimizer state
// The most blocks a whole parameter table is built for before a run is admitted: past it the
// table itself (a few KB per block) would cost what memory admission checks for, so the planner
// computes per block x count (train/ledger/plan_layers.h) and config validation leaves the
// train.freeze globs to the table the admitted run builds.
constexpr int64_t kWholeTableMaxBlocks = 4096;

// ParamKind, InitKind: model/block_recipe.h.

struct ParamInfo {
  std::string name;            // e.g. "block.3.attn.qkv.weight"
  std::vector<int64_t> shape;  // logical shape, row-major; linear weights are (out, in)
  ParamKind kind = ParamKind::kMatrix;
  int unit = 0;                // index into ParamTable::units
  int64_t offset_in_unit = 0;  // elements from the unit's start
  int64_t offset = 0;          // elements from the flat buffer's start
  int64_t numel = 0;
  // Independent matrices stacked along the rows: the fused q, k, v projection is 3 (C, C)
  // matrices; whole-matrix optimizer work (Muon's orthogonalisation) treats each on its own.
  int split = 1;
  InitKind init = InitKind::kZeros;
  double init_std = 0.0;
  // Hugging Face GPT-2 export: name, whether to transpose (Conv1D stores (in, out)), and how many
  // leading rows are real (the token embedding drops the vocab padding).
  std::string hf_name;
  bool hf_transpose = false;
  int64_t hf_rows = 0;
  // Trained (gradient, master, optimizer state) or frozen (weights only): train.freeze and
  // [lora] decide; see param_table_freeze.
  bool trainable = true;
  // A low-rank adapter factor (LoRA A or B) of the linear weight at table index lora_base.
  enum class Lora : uint8_t { kNone, kA, kB } lora = Lora::kNone;
  int lora_base = -1;
  // The first of the base weight's rows the adapter adapts (B has shape[0] of them): 0, or q, k
  // and v's own adapters' row block of the fused qkv weight.
  int64_t lora_row0 = 0;
  // In a part table (param_table_part): the row's index in the table it was taken from.
  int full_index = -1;
};

struct UnitInfo {
  std::string name;         // "embed", "block.0", ..., "final"
  int64_t offset = 0;       // elements from the flat buffer's start
  int64_t used = 0;         // elements up to the end of the last tensor (aligned)
  int64_t size = 0;         // padded to a multiple of world x block
  std::vector<int> params;  // indices into ParamTable::params
  // The unit's offset in the one-rank layout (units padded to a multiple of block only). Keys
  // of counter-based random streams over flat positions (stochastic rounding) use these
  // world-independent positions: offset_in_unit never depends on the world size.
  int64_t logical_offset = 0;
};

struct ParamTableOptions {
  int64_t block = 256;  // alignment and quantization block, elements
  int64_t world = 1;    // data-parallel ranks the units are padded for
};

struct ParamTable {
  std::vector<ParamInfo> params;
  std::vector<UnitInfo> units;
  int64_t total = 0;          // flat buffer length in elements (including padding)
  int64_t num_params = 0;     // real parameters (sum of numel)
  int64_t logical_total = 0;  // `total` of the one-rank layout (see UnitInfo::logical_offset)
  ParamTableOptions options;

  const ParamInfo& find(const std::string& name) const;  // throws Error if absent
  int index_of(const std::string& name) const;           // -1 if absent
};

// The table of `config`'s recipe (block_recipe.h); with config.lora enabled, the adapter factors
// follow the base tensors (table indices of the base tensors do not change) inside their blocks'
// units, and every other tensor is frozen.
ParamTable param_table_build(const ModelConfig& config, const ParamTableOptions& options = {});

// Marks the tensors matched by `patterns` frozen: a comma-separated list of shell globs (*, ?,
// [0-5]) over the table's names or their Hugging Face names ("block.[0-5].*", "embed.*",
// "transformer.h.0.mlp.*"). A pattern that matches nothing, or freezing every tensor, is an
// Error naming train.freeze.
void param_table_freeze(ParamTable* table, const std::string& patterns);

// The trainable (or frozen) rows of `full`, in order, laid out afresh by `options` with the same
// units (a unit may be left empty: size 0). With every row trainable the trainable part's layout
// is `full`'s own. ParamInfo::full_index maps back.
ParamTable param_table_part(const ParamTable& full, bool trainable,
                            const ParamTableOptions& options);
bool param_table_has_frozen(const ParamTable& table);

// Whether `name` matches the shell glob `pattern` (* any run, ? one character, [0-5] a class).
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace ledgerlm
