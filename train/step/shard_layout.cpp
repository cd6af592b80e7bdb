// Per-rank pieces of the sharding units (see shard_layout.h).
#include "train/step/shard_layout.h"

#include <algorithm>

#include "model/base/check.h"

namespace ledgerlm {

ShardLayout shard_layout_build(const ParamTable& table, int world, int rank) {
  LLM_REQUIRE(world >= 1 && rank >= 0 && rank < world, "shard layout: rank ", rank,
              " outside world ", world);
  LLM_ASSERT(table.options.world == world, "the parameter table was built for world ",
             table.options.world, ", not ", world);
  ShardLayout s;
  s.world = world;
  s.rank = rank;
  for (const UnitInfo& u : table.units) {
    LLM_ASSERT(u.size % world == 0, "unit ", u.name, " is not padded for world ", world);
    const int64_t piece = u.size / world;
    s.piece.push_back(piece);
    s.local_offset.push_back(s.length);
    s.ranges.push_back({u.offset + rank * piece, u.offset + (rank + 1) * piece});
    s.length += piece;
    s.largest_unit = std::max(s.largest_unit, u.size);
  }
  return s;
}

}  // namespace ledgerlm
