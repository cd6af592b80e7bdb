// How the flat buffers are divided among data-parallel ranks: every sharding unit (ParamTable
// units, padded to a multiple of world x block) is cut into `world` equal contiguous pieces and
// rank r holds piece r of each. Pieces are whole quantization blocks, so 8-bit blocks never
// straddle ranks, and the optimizer of a rank steps over its list of pieces (one per unit).
// A rank's shard buffers (master, optimizer states, reduced gradients, ZeRO-3 weights) are
// compact: its pieces laid end to end in unit order.
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_table.h"
#include "optim/optimizer.h"

namespace ledgerlm {

struct ShardLayout {
  int world = 1, rank = 0;
  std::vector<OptimRange> ranges;     // this rank's piece of every unit, flat layout, unit order
  std::vector<int64_t> local_offset;  // per unit: where its piece starts in the compact shard
  std::vector<int64_t> piece;         // per unit: elements of each rank's piece (size / world)
  int64_t length = 0;                 // elements of the compact shard
  int64_t largest_unit = 0;           // elements of the largest unit (buffer sizing)
};

// The layout of `rank` of `world` over a table built for `world` ranks.
ShardLayout shard_layout_build(const ParamTable& table, int world, int rank);

}  // namespace ledgerlm
