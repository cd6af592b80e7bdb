// Learning-rate schedules: constant, warmup + cosine decay, warmup + linear decay, each with a
// floor of lr * min_lr_ratio. A pure function of (config, step): resume needs no schedule state.
#pragma once

#include <cstdint>

#include "optim/optim_config.h"

namespace ledgerlm {

// LR for optimizer step `step` (1-based) of `total_steps`.
// Warmup: linear from lr/warmup_steps at step 1 to lr at step warmup_steps (never 0, so step 1
// already moves the weights). After warmup, decay over the remaining steps to the floor
// lr*min_lr_ratio, reached at step total_steps and held after it. "constant" is lr after warmup.
double schedule_lr(const OptimConfig& config, int64_t step, int64_t total_steps);

}  // namespace ledgerlm
