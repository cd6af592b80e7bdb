// How the model reaches its weights and gradients: by sharding unit (ParamTable::units), with
// announcements of when each unit is needed. The model knows nothing of ranks; data-parallel code
// (train/) implements this interface per ZeRO stage — gather a unit's weights before use, free
// them after, reduce-scatter its gradients once they are final — and a single process just hands
// out views of its flat buffers (FlatUnits).
//
// The sequence the model announces, for units embed (E), blocks 0..L-1 (B_l) and final (F):
//   forward:   acquire(E, fwd)  embedding          release(E, fwd)
//              acquire(B_l, fwd) block l           release(B_l, fwd)      for l = 0 .. L-1
//              acquire(F, fwd)  final layernorm    release(F, fwd)
//              acquire(E, fwd)  tied head (logits) release(E, fwd)
//   backward:  acquire(E, bwd)  head backward      release(E, bwd)    (E's gradients not final)
//              acquire(F, bwd)  final layernorm    release(F, bwd)    grads_done(F)
//              for l = L-1 .. 0, with model.recompute = block first
//                acquire(B_l, recompute) block l forward again  release(B_l, recompute)
//              then acquire(B_l, bwd) block l backward release(B_l, bwd)  grads_done(B_l)
//              acquire(E, bwd)  embedding backward release(E, bwd)    grads_done(E)
// An untied head (model.tie_embeddings = false) is the final unit's lm_head: the logits are
// computed inside F's forward acquisition and its backward inside F's backward acquisition, E is
// not acquired for the head at all, and E's gradients (the embedding backward's alone) get
// grads_done only when that backward runs.
// recompute = mlp recomputes inside the block's backward, while the unit is acquired for it.
// With frozen tensors, blocks below the lowest one that trains anything (and then the embedding's
// own backward) are skipped: no acquire for backward, no grads_done (their trained parts are
// empty). A forward without targets (evaluation, sampling) stops after the head. params(u) is valid
// between acquire(u) and release(u); grads(u) between acquire(u, bwd) and grads_done(u) — the
// embedding's gradients collect the head's and the input's contributions before they are final.
#pragma once

#include <cstdint>

#include "model/backend/backend.h"
#include "model/param_table.h"

namespace ledgerlm {

enum class UnitPhase : uint8_t { kForward, kBackward, kRecompute };
const char* unit_phase_name(UnitPhase phase);  // "forward", "backward", "recompute"

class UnitAccess {
 public:
  virtual ~UnitAccess() = default;
  // Unit u's weights in the compute dtype: element 0 is the unit's first element (the tensors
  // sit at ParamInfo::offset_in_unit).
  virtual Tensor params(int unit) = 0;
  // Unit u's gradient buffer, accumulated into (+=) by backward.
  virtual Tensor grads(int unit) = 0;
  // Unit u's frozen tensors (train.freeze, [lora]: weights that get no gradient), laid out by the
  // table's frozen part (param_table_part); valid like params(u). Empty when nothing is frozen.
  virtual Tensor frozen(int /*unit*/) { return Tensor(); }
  virtual void acquire(int unit, UnitPhase phase) = 0;
  virtual void release(int unit, UnitPhase phase) = 0;
  // Backward adds nothing more to unit u's gradients in this micro-batch.
  virtual void grads_done(int unit) = 0;
};

// The single-process implementation: views into flat parameter and gradient buffers laid out by
// the table; the announcements do nothing.
class FlatUnits final : public UnitAccess {
 public:
  // `grads` may be empty for forward-only use. With frozen tensors, `params` and `grads` are laid
  // out by `table` (the trained part) and `frozen` by `frozen_table`.
  FlatUnits(const ParamTable& table, Tensor params, Tensor grads = Tensor(),
            const ParamTable* frozen_table = nullptr, Tensor frozen = Tensor())
      : table_(table),
        params_(params),
        grads_(grads),
        frozen_table_(frozen_table),
        frozen_(frozen) {}
  Tensor frozen(int unit) override {
    return frozen_table_ ? frozen_.offset(frozen_table_->units[unit].offset) : Tensor();
  }
  Tensor params(int unit) override { return params_.offset(table_.units[unit].offset); }
  Tensor grads(int unit) override {
    return grads_.empty() ? grads_ : grads_.offset(table_.units[unit].offset);
  }
  void acquire(int, UnitPhase) override {}
  void release(int, UnitPhase) override {}
  void grads_done(int) override {}

 private:
  const ParamTable& table_;
  Tensor params_, grads_;
  const ParamTable* frozen_table_;
  Tensor frozen_;
};

}  // namespace ledgerlm
