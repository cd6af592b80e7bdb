// The placement table (see placement.h).
#include "train/step/placement.h"

#include <algorithm>
#include <cstdio>

#include "model/base/check.h"
#include "optim/muon_plan.h"
#include "optim/optim_groups.h"

namespace ledgerlm {

const char* location_name(Location where) {
  switch (where) {
    case Location::kDevice:
      return "device";
    case Location::kHost:
      return "host";
    case Location::kDisk:
      return "disk";
  }
  return "?";
}

ParamTable model_table_for_run(const RunConfig& config, int world) {
  ParamTableOptions o;
  o.block = config.optim.block_size;
  o.world = world;
  ParamTable t = param_table_build(config.model, o);
  param_table_freeze(&t, config.train.freeze);
  return t;
}

ParamTable param_table_for_run(const RunConfig& config, int world) {
  const ParamTable full = model_table_for_run(config, world);
  return param_table_has_frozen(full) ? param_table_part(full, true, full.options) : full;
}

ParamTable frozen_table_for_run(const RunConfig& config) {
  const ParamTable full = model_table_for_run(config, 1);
  return param_table_part(full, false, full.options);
}

int zero_stage_effective(const RunConfig& config, int world) {
  return world > 1 ? static_cast<int>(config.dist.zero) : 0;
}

namespace {

// The spans of this rank's part [begin, begin + count) of something whose whole sits at `whole_at`
// in the flat layout, and at `local` in the compact shard.
struct Where {
  const PlacementTable& t;

  Span whole(int64_t numel, int64_t whole_at) const { return {0, numel, whole_at}; }
  Span compute(int64_t numel, int64_t whole_at, int64_t begin, int64_t count, int64_t local) const {
    return t.stage == 3 ? Span{begin, count, local} : whole(numel, whole_at);
  }
  // The reduced gradients: stage 1 sums this rank's piece of a unit in place at the unit's start
  // (`unit_at` is where this part lands there).
  Span grads(int64_t numel, int64_t whole_at, int64_t begin, int64_t count, int64_t unit_at,
             int64_t local) const {
    if (t.stage == 0) return whole(numel, whole_at);
    if (t.stage == 1) return {begin, count, unit_at};
    return {begin, count, local};
  }
  Span master(const Span& compute, int64_t numel, int64_t whole_at, int64_t begin, int64_t count,
              int64_t local) const {
    if (t.stage == 0) return whole(numel, whole_at);
    if (t.master_is_compute) return {begin, count, compute.at_of(begin)};
    return {begin, count, local};
  }
  Span state(int64_t numel, int64_t whole_at, int64_t begin, int64_t count, int64_t local) const {
    return t.stage == 0 ? whole(numel, whole_at) : Span{begin, count, local};
  }
};

}  // namespace

PlacementTable placement_build(const ParamTable& table, const ShardLayout& layout, int stage,
                               const PrecisionPlan& plan, const OptimConfig& optim) {
  LLM_REQUIRE(stage >= 0 && stage <= 3, "dist.zero = ", stage, ": expected 0, 1, 2 or 3");
  PlacementTable t;
  t.stage = stage;
  t.world = layout.world;
  t.rank = layout.rank;
  t.master_is_compute = !plan.separate_master && !plan.master_none;
  t.writes_checkpoint = stage >= 1 || layout.rank == 0;
  const int64_t E = table.total, L = layout.length;
  t.compute_length = stage == 3 ? L : E;
  t.grads_length = stage >= 2 ? L : E;
  t.state_length = stage >= 1 ? L : E;
  t.master_length = t.master_is_compute ? 0 : t.state_length;
  const Where w{t};

  for (size_t u = 0; u < table.units.size(); ++u) {
    const UnitInfo& unit = table.units[u];
    const int64_t piece = stage == 0 ? unit.size : layout.piece[u];
    const int64_t begin = stage == 0 ? 0 : layout.ranges[u].begin - unit.offset;
    const int64_t local = stage == 0 ? unit.offset : layout.local_offset[u];
    UnitPlacement up;
    up.unit = static_cast<int>(u);
    up.compute = w.compute(unit.size, unit.offset, begin, piece, local);
    up.grads = w.grads(unit.size, unit.offset, begin, piece, unit.offset, local);
    up.master = w.master(up.compute, unit.size, unit.offset, begin, piece, local);
    up.state = w.state(unit.size, unit.offset, begin, piece, local);
    up.logical_begin = unit.logical_offset + begin;
    t.units.push_back(up);
  }

  const std::vector<int> muon_owner = muon_owners(table, optim, layout.world);
  for (size_t i = 0; i < table.params.size(); ++i) {
    const ParamInfo& p = table.params[i];
    const UnitInfo& unit = table.units[static_cast<size_t>(p.unit)];
    const UnitPlacement& up = t.units[static_cast<size_t>(p.unit)];
    TensorPlacement tp;
    tp.param = static_cast<int>(i);
    tp.unit = p.unit;
    tp.group = optim_group_of(p, optim);
    // The part of the tensor inside this rank's piece of its unit (in unit-relative elements).
    const int64_t rel = p.offset - unit.offset;
    const int64_t lo = std::max(up.state.begin, rel);
    const int64_t hi = std::min(up.state.begin + up.state.count, rel + p.numel);
    const int64_t begin = lo - rel, count = std::max<int64_t>(0, hi - lo);
    const int64_t local = up.state.at_of(lo);
    tp.compute = w.compute(p.numel, p.offset, begin, count, stage == 3 ? local : 0);
    tp.grads = w.grads(p.numel, p.offset, begin, count, up.grads.at_of(lo), local);
    tp.master = w.master(tp.compute, p.numel, p.offset, begin, count, local);
    tp.state = w.state(p.numel, p.offset, begin, count, local);
    if (stage == 0) {
      tp.first_rank = 0;
      tp.last_rank = layout.world - 1;
      tp.holders = {{layout.rank, 0, p.numel}};  // what this rank's optimizer sees
    } else {
      const int64_t piece = layout.piece[static_cast<size_t>(p.unit)];
      tp.first_rank = static_cast<int>(rel / piece);
      tp.last_rank = static_cast<int>((rel + p.numel - 1) / piece);
      for (int r = tp.first_rank; r <= tp.last_rank; ++r) {
        const int64_t lo_r = std::max(static_cast<int64_t>(r) * piece, rel);
        const int64_t hi_r = std::min(static_cast<int64_t>(r + 1) * piece, rel + p.numel);
        if (lo_r < hi_r) tp.holders.push_back({r, lo_r - rel, hi_r - lo_r});
      }
    }
    tp.owner = tp.first_rank;
    if (muon_owner[i] >= 0) tp.owner = stage == 0 ? layout.rank : muon_owner[i];
    t.tensors.push_back(tp);
  }
  return t;
}

OptimShard PlacementTable::optimizer_shard() const {
  OptimShard shard;
  shard.length = state_length;
  shard.rank = rank;
  shard.world = world;
  for (const TensorPlacement& tp : tensors)
    if (tp.group != kFrozenGroup) shard.tensors.push_back({tp.param, tp.owner, tp.holders});
  for (const TensorPlacement& tp : tensors) {
    if (tp.group == kFrozenGroup || tp.state.count == 0) continue;
    OptimPart part;
    part.param = tp.param;
    part.group = tp.group;
    part.param_begin = tp.state.begin;
    part.count = tp.state.count;
    part.local = tp.state.at;
    part.master_at = tp.master.at;
    part.grad_at = tp.grads.at;
    part.compute_at = tp.compute.at_of(tp.state.begin);
    shard.parts.push_back(part);
  }
  return shard;
}

namespace {

std::string span_text(const Span& s, int64_t numel) {
  if (s.count == 0) return "-";
  char buf[96];
  if (s.begin == 0 && s.count == numel)
    std::snprintf(buf, sizeof buf, "all@%lld", static_cast<long long>(s.at));
  else
    std::snprintf(buf, sizeof buf, "[%lld,%lld)@%lld", static_cast<long long>(s.begin),
                  static_cast<long long>(s.begin + s.count), static_cast<long long>(s.at));
  return std::string(buf) +
         (s.where == Location::kDevice ? "" : std::string(" ") + location_name(s.where));
}

}  // namespace

std::string placement_describe_frozen(const ParamTable& frozen) {
  std::string out;
  char line[512];
  for (const ParamInfo& p : frozen.params) {
    Span whole{0, p.numel, p.offset};
    std::snprintf(line, sizeof line, "%-28s %-9s %-22s %-22s %-22s %-22s %-5s %-6s %s\n",
                  p.name.c_str(), "frozen", span_text(whole, p.numel).c_str(), "-", "-", "-", "-",
                  "all", "(params.frozen: weights only)");
    out += line;
  }
  return out;
}

std::string placement_describe(const PlacementTable& t, const ParamTable& table,
                               const std::vector<std::string>& group_names,
                               const std::vector<std::string>& state_names,
                               const std::vector<std::string>& tensor_states) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "placement of rank %d of %d (ZeRO stage %d)\n", t.rank, t.world,
                t.stage);
  out += line;
  std::snprintf(line, sizeof line, "%-28s %-9s %-22s %-22s %-22s %-22s %-5s %-6s%s\n", "tensor",
                "group", "compute", "grads", "master", "state", "owner", "ranks",
                tensor_states.empty() ? "" : " optimizer state");
  out += line;
  for (const TensorPlacement& tp : t.tensors) {
    const ParamInfo& p = table.params[static_cast<size_t>(tp.param)];
    const std::string group =
        tp.group == kFrozenGroup
            ? "frozen"
            : (static_cast<size_t>(tp.group) < group_names.size() ? group_names[tp.group] : "?");
    std::string states;
    for (size_t k = 0; k < tp.state_where.size() && k < state_names.size(); ++k)
      states += (k ? "," : " ") + state_names[k] + ":" + location_name(tp.state_where[k]);
    char ranks[32];
    std::snprintf(ranks, sizeof ranks, "%d-%d", tp.first_rank, tp.last_rank);
    const size_t i = static_cast<size_t>(tp.param);
    const std::string per_tensor = i < tensor_states.size() ? " " + tensor_states[i] : "";
    std::snprintf(
        line, sizeof line, "%-28s %-9s %-22s %-22s %-22s %-22s %-5d %-6s%s%s\n", p.name.c_str(),
        group.c_str(), span_text(tp.compute, p.numel).c_str(), span_text(tp.grads, p.numel).c_str(),
        t.master_is_compute ? "=compute" : span_text(tp.master, p.numel).c_str(),
        span_text(tp.state, p.numel).c_str(), tp.owner, ranks, per_tensor.c_str(), states.c_str());
    out += line;
  }
  return out;
}

}  // namespace ledgerlm
