// The placement table: for every tensor of the parameter table, where this rank keeps each of its
// buffers — compute copy, gradients, fp32 master, optimizer state — which part of the tensor each
// holds, in which memory, which optimizer group trains it and which rank does its whole-tensor
// work. Built once from the ZeRO stage, the precision plan and the shard layout; the gradient
// reduction, the optimizer, checkpoint I/O and the per-tensor report read it instead of asking
// the stage again. Units (the sharding and communication buckets) get the same description for
// the passes that run unit by unit.
//
// What each stage keeps (E flat elements, L = E / world this rank's compact shard: its piece of
// every unit laid end to end, see shard_layout.h):
//   stage 0: every buffer whole (E), every rank the same; rank 0 writes checkpoints.
//   stage 1: compute copy and gradient buffer whole; the reduced gradients this rank reads are its
//            piece of each unit, summed in place at the unit's start; master and state compact (L).
//   stage 2: as 1, but the gradients are the compact shard (reduced during backward).
//   stage 3: as 2, and the compute copy is the compact shard too (gathered unit by unit for use).
// fp32 weights are their own master: their master part is where the compute copy holds it (in
// the whole copy at stages 0-2, in its shard at 3). With precision.master = none the "master" is
// an fp32 scratch of this rank's part of the compute copy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/param_table.h"
#include "optim/optimizer.h"
#include "train/step/precision_plan.h"
#include "train/step/shard_layout.h"

namespace ledgerlm {

// Where a buffer's bytes live: the compute backend's memory, host memory beside it, or files.
enum class Location : uint8_t { kDevice, kHost, kDisk };
const char* location_name(Location where);

// One buffer's hold on a tensor (or unit) on this rank: elements [begin, begin + count) of it
// (count 0: none), the first of them at element `at` of the buffer.
struct Span {
  int64_t begin = 0, count = 0, at = 0;
  Location where = Location::kDevice;
  // Where element `element` (held here) sits in the buffer.
  int64_t at_of(int64_t element) const { return at + element - begin; }
};

struct TensorPlacement {
  int param = -1, unit = -1;
  int group = 0;  // optimizer group (optim_groups.h); kFrozenGroup: not trained
  // Whole-tensor work (Muon's orthogonalisation of a matrix's update) runs on `owner`: for
  // Muon's matrices balanced by Newton–Schulz FLOPs (optim/muon_plan.h) from stage 1, this rank
  // at stage 0 (every rank holds everything); else the first rank holding a piece. The
  // optimizer shard's pieces of the tensor are on ranks first_rank..last_rank, as `holders` say.
  int owner = 0, first_rank = 0, last_rank = 0;
  std::vector<OptimHolder> holders;
  // compute: the compute copy; grads: the reduced gradients the optimizer reads; master: the fp32
  // weights the optimizer updates; state: the optimizer's compact state buffers.
  Span compute, grads, master, state;
  // Location of each optimizer state component (Optimizer::state_components() order); empty until
  // the optimizer has allocated, then each as the state's location.
  std::vector<Location> state_where;
};

// This rank's part of one sharding unit, for the passes that go unit by unit (reduction, norm,
// compute-copy writes). `begin` counts from the unit's start.
struct UnitPlacement {
  int unit = -1;
  Span compute, grads, master, state;
  int64_t logical_begin = 0;  // the part's first element in the one-rank layout (random keys)
};

struct PlacementTable {
  int stage = 0, world = 1, rank = 0;
  std::vector<TensorPlacement> tensors;  // one per parameter-table row, in table order
  std::vector<UnitPlacement> units;      // one per unit, in unit order
  // Elements of this rank's buffers.
  int64_t compute_length = 0, grads_length = 0, master_length = 0, state_length = 0;
  bool master_is_compute = false;  // fp32 weights: the master is the compute copy's buffer
  bool writes_checkpoint = true;   // this rank writes its parts (stage 0: rank 0 only)

  // The parts the optimizer steps (trained tensors held here), as init() takes them.
  OptimShard optimizer_shard() const;
};

// The model's whole parameter table for a run of `world` ranks: [lora] adapters added, every
// tensor marked trained or frozen (train.freeze, [lora]).
ParamTable model_table_for_run(const RunConfig& config, int world);
// Its trained rows (units padded for world x optim.block_size): the table gradients, the fp32
// master, the optimizer state, ZeRO sharding and checkpoints lay out. Without frozen tensors it
// is the whole table.
ParamTable param_table_for_run(const RunConfig& config, int world);
// Its frozen rows: weights only, whole on every rank (one-rank layout).
ParamTable frozen_table_for_run(const RunConfig& config);

// The ZeRO stage that takes effect: dist.zero on several ranks, 0 on one (nothing to shard).
int zero_stage_effective(const RunConfig& config, int world);

PlacementTable placement_build(const ParamTable& table, const ShardLayout& layout, int stage,
                               const PrecisionPlan& plan, const OptimConfig& optim);

// The table as text, one line per tensor: group, parts held and where, owner, ranks.
// `states`, when given, is a text per table row (the optimizer state tensors it has): a last
// column.
// Lines for the frozen tensors (weights only, whole on every rank, in the frozen buffer) after
// placement_describe's: "" when `frozen` has none.
std::string placement_describe_frozen(const ParamTable& frozen);

std::string placement_describe(const PlacementTable& placement, const ParamTable& table,
                               const std::vector<std::string>& group_names,
                               const std::vector<std::string>& state_names,
                               const std::vector<std::string>& states = {});

}  // namespace ledgerlm
