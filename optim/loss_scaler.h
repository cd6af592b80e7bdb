// Loss scaling for fp16 training. Dynamic: start at init_scale, multiply by growth_factor after
// growth_interval consecutive finite steps, multiply by backoff on a non-finite step (the step is
// skipped by the trainer), never below min_scale. Static: the scale never changes. The state is
// plain data so checkpoints save and restore it exactly.
#pragma once

#include <cstdint>

namespace ledgerlm {

struct LossScalerConfig {
  bool dynamic = true;
  double init_scale = 65536.0;  // 2^16
  int64_t growth_interval = 2000;
  double growth_factor = 2.0;
  double backoff = 0.5;
  double min_scale = 1.0;

  void validate() const;  // throws Error naming the offending precision.loss_scale_* key
};

struct LossScalerState {
  double scale = 65536.0;
  int64_t good_steps = 0;         // consecutive finite steps since the last change
  int64_t skipped_steps = 0;      // total non-finite (skipped) steps
  int64_t consecutive_skips = 0;  // non-finite steps in a row (the trainer stops after N)
};

class LossScaler {
 public:
  LossScaler() : LossScaler(LossScalerConfig{}) {}
  explicit LossScaler(const LossScalerConfig& config);

  double scale() const { return state_.scale; }
  // 1/scale, the factor the trainer folds into OptimStepInfo::grad_scale.
  double inverse_scale() const { return 1.0 / state_.scale; }
  // Call once per optimizer step with whether all gradients were finite.
  void update(bool finite);

  const LossScalerState& state() const { return state_; }
  void load_state(const LossScalerState& state);  // checks the scale is finite and > 0
  const LossScalerConfig& config() const { return config_; }

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace ledgerlm
