// The model's UnitAccess under ZeRO stages 2 and 3 (stages 0 and 1 use FlatUnits over whole
// buffers): gradients are reduce-scattered unit by unit as backward finishes each one, and at
// stage 3 the weights are gathered unit by unit just before use.
//
// Gradients (stages 2, 3). Backward writes a unit's gradients into a whole-unit buffer: one for
// the embedding unit (its gradients collect the head's and the input's contributions, so it
// stays open for the whole backward) and one shared by every other unit (they are finished one
// at a time). grads_done(u) reduce-scatters the buffer in place — in fp32: a 16-bit buffer is
// widened into a staging buffer first — and adds this rank's summed piece to its gradient shard
// (so accumulation over micro-batches keeps only this rank's running sum).
//
// Weights (stage 3). The compute copy is a shard; params(u) gathers unit u into a gather buffer
// the first time it is needed after acquire. With reshard_after_forward one buffer serves every
// unit (the unit last gathered stays there, so the tied head reuses the embedding gathered for
// the output's forward in backward); without it every unit keeps its own buffer from its
// forward until the optimizer step (invalidate()).
#pragma once

#include <cstdint>
#include <vector>

#include "model/backend/backend.h"
#include "model/param_table.h"
#include "model/unit_access.h"
#include "train/comm/comm.h"
#include "train/step/shard_layout.h"

namespace ledgerlm {

struct ZeroUnitsConfig {
  int stage = 2;  // 2 or 3
  bool reshard_after_forward = true;
  DType params = DType::kF32, grads = DType::kF32;
};

class ZeroUnits final : public UnitAccess {
 public:
  // `params`: the whole compute copy (stage 2) or this rank's compact shard of it (stage 3).
  // `grad_shard`: this rank's compact gradient shard (accumulated into).
  ZeroUnits(const ParamTable& table, const ShardLayout& layout, Backend& backend, Comm& comm,
            const ZeroUnitsConfig& config, Tensor params, Tensor grad_shard,
            const ParamTable* frozen_table = nullptr, Tensor frozen = Tensor());

  Tensor params(int unit) override;
  Tensor grads(int unit) override;
  // Frozen weights are whole on every rank (never gathered): a view into them.
  Tensor frozen(int unit) override;
  void acquire(int unit, UnitPhase phase) override;
  void release(int unit, UnitPhase phase) override;
  void grads_done(int unit) override;

  // The weights changed (optimizer step): gathered units are stale.
  void invalidate();
  // Milliseconds spent in collectives since the last call.
  double take_comm_ms();

 private:
  Tensor gather(int unit);
  Buffer& grad_buffer(int unit);

  const ParamTable& table_;
  const ShardLayout& layout_;
  Backend& be_;
  Comm& comm_;
  ZeroUnitsConfig cfg_;
  Tensor params_, grad_shard_;
  const ParamTable* frozen_table_;
  Tensor frozen_;
  int embed_unit_ = 0;
  Buffer embed_grads_, unit_grads_;  // whole-unit gradient buffers (comm)
  Buffer wide_;                      // a 16-bit unit widened to fp32 to be summed (comm)
  std::vector<Buffer> gathered_;     // stage 3: one slot, or one per unit
  std::vector<int> slot_unit_;       // unit held by each slot (-1: none)
  std::vector<int> resident_;        // acquire count per unit
  std::vector<bool> grads_open_;     // per unit: backward has begun and is not done
  double comm_ms_ = 0.0;
};

}  // namespace ledgerlm
