// Gradient clipping factor (see grad_clip.h).
#include "optim/grad_clip.h"

#include <algorithm>
#include <cmath>

namespace ledgerlm {

double grad_clip_factor(double global_norm, double max_norm) {
  if (max_norm <= 0.0 || !std::isfinite(global_norm)) return 1.0;
  // The 1e-6 keeps the factor finite for a zero norm and matches torch's clip_grad_norm_.
  return std::min(1.0, max_norm / (global_norm + 1e-6));
}

}  // namespace ledgerlm
