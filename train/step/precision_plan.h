// What the [precision] section means for the training state's buffers: dtypes of the compute
// copy and the gradients, whether an fp32 master exists apart from the compute copy, rounding and
// loss scaling. Configuration values, not code paths.
#pragma once

#include "model/backend/backend.h"
#include "model/base/dtype.h"
#include "train/config/run_config.h"

namespace ledgerlm {

struct PrecisionPlan {
  DType params = DType::kF32;    // compute copy
  DType grads = DType::kF32;     // the gradient buffer backward accumulates into
  bool separate_master = false;  // an fp32 master copy exists apart from the compute copy
  bool master_none = false;      // no master: the optimizer updates the compute copy directly
  Rounding rounding = Rounding::kNearest;
  bool scaler_dynamic = false;
  bool scaler_on = false;  // loss scaling active (dynamic or static)
};
PrecisionPlan precision_plan(const RunConfig& config);

}  // namespace ledgerlm
