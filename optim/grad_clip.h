// Gradient clipping by global norm. The trainer computes the global norm (all ranks, all
// tensors, after unscaling); the factor is folded into OptimStepInfo::grad_scale, so clipping
// costs no extra pass over the gradients.
#pragma once

namespace ledgerlm {

// min(1, max_norm / (norm + 1e-6)); 1 when max_norm <= 0 (clipping off). A non-finite norm
// gives 1: the step is skipped elsewhere, clipping must not turn Inf into 0.
double grad_clip_factor(double global_norm, double max_norm);

}  // namespace ledgerlm
