// ZeRO-2/3 unit access (see zero_units.h).
#include "train/step/zero_units.h"

#include <algorithm>
#include <chrono>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int64_t bytes_of(int64_t elements, DType dt) {
  return elements * static_cast<int64_t>(dtype_size(dt));
}

}  // namespace

ZeroUnits::ZeroUnits(const ParamTable& table, const ShardLayout& layout, Backend& backend,
                     Comm& comm, const ZeroUnitsConfig& config, Tensor params, Tensor grad_shard,
                     const ParamTable* frozen_table, Tensor frozen)
    : table_(table),
      layout_(layout),
      be_(backend),
      comm_(comm),
      cfg_(config),
      params_(params),
      grad_shard_(grad_shard),
      frozen_table_(frozen_table),
      frozen_(frozen) {
  LLM_ASSERT(cfg_.stage == 2 || cfg_.stage == 3, "ZeroUnits serves stages 2 and 3");
  const size_t units = table.units.size();
  // By name: a frozen embedding is not in the (trained) table's rows, its unit still is.
  embed_unit_ = 0;
  for (size_t u = 0; u < units; ++u)
    if (table.units[u].name == "embed") embed_unit_ = static_cast<int>(u);
  int64_t largest_other = 0;
  for (size_t u = 0; u < units; ++u)
    if (static_cast<int>(u) != embed_unit_)
      largest_other = std::max(largest_other, table.units[u].size);
  const int64_t embed = table.units[static_cast<size_t>(embed_unit_)].size;
  embed_grads_ = be_.allocate(MemTag::kComm, static_cast<size_t>(bytes_of(embed, cfg_.grads)));
  unit_grads_ =
      be_.allocate(MemTag::kComm, static_cast<size_t>(bytes_of(largest_other, cfg_.grads)));
  if (cfg_.grads != DType::kF32)
    wide_ = be_.allocate(MemTag::kComm, static_cast<size_t>(layout.largest_unit * 4));
  if (cfg_.stage == 3) {
    const size_t slots = cfg_.reshard_after_forward ? 1 : units;
    for (size_t s = 0; s < slots; ++s) {
      const int64_t n = cfg_.reshard_after_forward ? layout.largest_unit : table.units[s].size;
      gathered_.push_back(
          be_.allocate(MemTag::kComm, static_cast<size_t>(bytes_of(n, cfg_.params))));
    }
    slot_unit_.assign(slots, -1);
  }
  resident_.assign(units, 0);
  grads_open_.assign(units, false);
}

Tensor ZeroUnits::gather(int unit) {
  const size_t slot = cfg_.reshard_after_forward ? 0 : static_cast<size_t>(unit);
  Tensor buf(gathered_[slot].data(), cfg_.params);
  if (slot_unit_[slot] == unit) return buf;
  const auto t0 = Clock::now();
  const int64_t piece = layout_.piece[static_cast<size_t>(unit)];
  be_.copy(buf.offset(layout_.rank * piece),
           params_.offset(layout_.local_offset[static_cast<size_t>(unit)]), piece);
  comm_.all_gather_in_place(be_, buf, piece);
  slot_unit_[slot] = unit;
  comm_ms_ += ms_since(t0);
  return buf;
}

Tensor ZeroUnits::params(int unit) {
  LLM_ASSERT(resident_[static_cast<size_t>(unit)] > 0, "params of unit ", unit,
             " used while released");
  if (cfg_.stage == 2) return params_.offset(table_.units[static_cast<size_t>(unit)].offset);
  return gather(unit);
}

Tensor ZeroUnits::frozen(int unit) {
  return frozen_table_ ? frozen_.offset(frozen_table_->units[static_cast<size_t>(unit)].offset)
                       : Tensor();
}

Buffer& ZeroUnits::grad_buffer(int unit) {
  return unit == embed_unit_ ? embed_grads_ : unit_grads_;
}

Tensor ZeroUnits::grads(int unit) {
  LLM_ASSERT(grads_open_[static_cast<size_t>(unit)], "gradients of unit ", unit,
             " used outside its backward");
  return Tensor(grad_buffer(unit).data(), cfg_.grads);
}

void ZeroUnits::acquire(int unit, UnitPhase phase) {
  const size_t u = static_cast<size_t>(unit);
  ++resident_[u];
  if (phase != UnitPhase::kBackward || grads_open_[u]) return;
  if (unit != embed_unit_)
    for (size_t v = 0; v < grads_open_.size(); ++v)
      LLM_ASSERT(!grads_open_[v] || static_cast<int>(v) == embed_unit_, "unit ", unit,
                 " began its backward while unit ", v, "'s gradients are still open");
  be_.zero(Tensor(grad_buffer(unit).data(), cfg_.grads), table_.units[u].size);
  grads_open_[u] = true;
}

void ZeroUnits::release(int unit, UnitPhase) {
  LLM_ASSERT(resident_[static_cast<size_t>(unit)] > 0, "release of unit ", unit,
             " that is not acquired");
  --resident_[static_cast<size_t>(unit)];
}

void ZeroUnits::grads_done(int unit) {
  const size_t u = static_cast<size_t>(unit);
  LLM_ASSERT(grads_open_[u], "grads_done of unit ", unit, " without its backward");
  const auto t0 = Clock::now();
  const int64_t n = table_.units[u].size, piece = layout_.piece[u];
  Tensor sum(grad_buffer(unit).data(), cfg_.grads);
  if (cfg_.grads != DType::kF32) {  // sum in fp32, round once into the shard
    Tensor wide(wide_.data(), DType::kF32);
    be_.convert(wide, sum, n);
    sum = wide;
  }
  comm_.reduce_scatter_sum(be_, sum, piece);  // this rank's piece, summed, at the start
  be_.accumulate(grad_shard_.offset(layout_.local_offset[u]), sum, piece);
  grads_open_[u] = false;
  comm_ms_ += ms_since(t0);
}

void ZeroUnits::invalidate() {
  std::fill(slot_unit_.begin(), slot_unit_.end(), -1);
}

double ZeroUnits::take_comm_ms() {
  const double ms = comm_ms_;
  comm_ms_ = 0.0;
  return ms;
}

}  // namespace ledgerlm
