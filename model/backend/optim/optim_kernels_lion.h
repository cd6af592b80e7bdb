// Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms"), per element, in the
// order of the authors' code: decoupled weight decay w *= 1 - lr*wd; the update is the sign of
// the interpolation c = beta1*m + (1-beta1)*g (sign(0) = 0), w -= lr*sign(c); then the one
// momentum m = beta2*m + (1-beta2)*g. Every step moves each weight by exactly lr (or 0), so
// Lion's LR is 3-10x smaller than AdamW's and its weight decay correspondingly larger.
#pragma once

#include <cstdint>

#include "model/backend/optim/optim_kernels.h"

namespace ledgerlm {

template <class T>
struct LionStep {
  T decay = 1;  // 1 - lr*wd
  T lr = 0;
  T beta1 = 0, one_minus_beta1 = 1;
  T beta2 = 0, one_minus_beta2 = 1;
};

template <class T>
LionStep<T> lion_step_make(double lr, double beta1, double beta2, double wd) {
  LionStep<T> s;
  s.decay = static_cast<T>(1.0 - lr * wd);
  s.lr = static_cast<T>(lr);
  s.beta1 = static_cast<T>(beta1);
  s.one_minus_beta1 = static_cast<T>(1.0 - beta1);
  s.beta2 = static_cast<T>(beta2);
  s.one_minus_beta2 = static_cast<T>(1.0 - beta2);
  return s;
}

template <class T, class S, class G>
LLM_HD inline void lion_update_at(T* w, S* m, const G& g, int64_t i, const LionStep<T>& s) {
  const T gi = g[i];
  const T mi = state_load(m[i]);
  const T c = s.beta1 * mi + s.one_minus_beta1 * gi;
  const T sign = static_cast<T>((c > T(0)) - (c < T(0)));
  const T wd = s.decay == T(1) ? w[i] : w[i] * s.decay;
  w[i] = wd - s.lr * sign;
  state_put(m[i], s.beta2 * mi + s.one_minus_beta2 * gi);
}

}  // namespace ledgerlm
