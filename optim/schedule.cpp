// LR schedules (see schedule.h).
#include "optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "model/base/check.h"

namespace ledgerlm {

double schedule_lr(const OptimConfig& config, int64_t step, int64_t total_steps) {
  LLM_REQUIRE(step >= 1, "schedule_lr: step must be >= 1 (got ", step, ")");
  const double peak = config.lr;
  const int64_t warmup = config.warmup_steps;
  if (step <= warmup) return peak * static_cast<double>(step) / static_cast<double>(warmup);
  if (config.schedule == "constant") return peak;
  const double floor = peak * config.min_lr_ratio;
  const int64_t decay_steps = total_steps - warmup;
  if (decay_steps <= 0) return floor;
  // progress 0 right after warmup, 1 at the last step.
  const double progress =
      std::clamp(static_cast<double>(step - warmup) / static_cast<double>(decay_steps), 0.0, 1.0);
  double shape = 0.0;  // 1 -> 0 over the decay
  if (config.schedule == "cosine") {
    shape = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  } else if (config.schedule == "linear") {
    shape = 1.0 - progress;
  } else {
    fail("optim.schedule: expected constant, cosine or linear (got '" + config.schedule + "')");
  }
  return floor + (peak - floor) * shape;
}

}  // namespace ledgerlm
