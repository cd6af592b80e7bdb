// The loop of `ledgerlm train` around train_step: budgets (steps, tokens, wall-clock) and the LR
// schedule set against them, evaluation, the metrics log and progress lines, weight saves, full
// checkpoints, and clean stopping on signals or a STOP file.
#pragma once

#include <cstdint>

#include "train/config/run_config.h"
#include "train/run/run_setup.h"

namespace ledgerlm {

// Steps the schedule decays over: max_steps, else the steps the token budget implies; a
// wall-clock-only budget is extrapolated from the pace so far (`elapsed` seconds for `step`).
int64_t schedule_total_steps(const TrainConfig& t, int64_t tokens_per_step, int64_t step,
                             double elapsed);

// Trains until a budget is spent or a stop is requested; returns the process exit code.
int train_loop(TrainRun& run);

}  // namespace ledgerlm
