// Dynamic / static loss scaler (see loss_scaler.h).
#include "optim/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {

void LossScalerConfig::validate() const {
  LLM_REQUIRE(std::isfinite(init_scale) && init_scale > 0.0,
              "precision.init_scale: expected > 0 (got ", init_scale, ")");
  LLM_REQUIRE(growth_interval > 0, "precision.growth_interval: expected > 0 (got ", growth_interval,
              ")");
  LLM_REQUIRE(std::isfinite(growth_factor) && growth_factor >= 1.0,
              "precision.growth_factor: expected >= 1 (got ", growth_factor, ")");
  LLM_REQUIRE(backoff > 0.0 && backoff <= 1.0, "precision.backoff_factor: expected in (0, 1] (got ",
              backoff, ")");
  LLM_REQUIRE(std::isfinite(min_scale) && min_scale > 0.0,
              "loss scaler: the minimum scale must be > 0 (got ", min_scale, ")");
}

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  config_.validate();
  state_.scale = config_.init_scale;
}

void LossScaler::update(bool finite) {
  if (!finite) {
    ++state_.skipped_steps;
    ++state_.consecutive_skips;
    state_.good_steps = 0;
    if (config_.dynamic) state_.scale = std::max(config_.min_scale, state_.scale * config_.backoff);
    return;
  }
  state_.consecutive_skips = 0;
  if (!config_.dynamic) return;
  if (++state_.good_steps >= config_.growth_interval) {
    const double grown = state_.scale * config_.growth_factor;
    // Growth that overflows double would make every step non-finite; stay put instead.
    if (std::isfinite(grown)) state_.scale = grown;
    state_.good_steps = 0;
  }
}

void LossScaler::load_state(const LossScalerState& state) {
  LLM_REQUIRE(std::isfinite(state.scale) && state.scale > 0.0,
              "loss scaler state: scale must be finite and > 0 (got ", state.scale, ")");
  LLM_REQUIRE(state.good_steps >= 0 && state.skipped_steps >= 0 && state.consecutive_skips >= 0,
              "loss scaler state: negative counters");
  state_ = state;
}

}  // namespace ledgerlm
