// Schedule-Free AdamW (Defazio et al. 2024, "The Road Less Scheduled"), per element, kept as the
// pair the method averages: x (the fp32 master: the weights evaluated and exported) and z (state),
// with v Adam's second moment. Gradients are taken at y = (1-beta1)*z + beta1*x, the point the
// compute copy holds during training. One step:
//   v = beta2*v + (1-beta2)*g^2;  u = g / (sqrt(v / bc2) + eps) + wd*y   (bc2 = 1 - beta2^t)
//   z -= lr*u;  x = (1-c)*x + c*z;  y = (1-beta1)*z + beta1*x  (written to the compute copy)
// where lr already carries the warmup and c is the lr_max^2-weighted average's
// coefficient (optim/adamw_schedulefree.cpp). This is the authors' update written in x instead
// of y (their y' = (1-c)*y + c*z + lr*(beta1*(1-c) - 1)*u expands to the same point).
#pragma once

#include <cstdint>

#include "model/backend/optim/optim_kernels.h"

namespace ledgerlm {

template <class T>
struct ScheduleFreeStep {
  T lr = 0;    // the warmed-up LR
  T bc2 = 1;   // 1 - beta2^t
  T ckp1 = 0;  // weight of the new z in the average x
  T beta1 = 0, one_minus_beta1 = 1;
  T beta2 = 0, one_minus_beta2 = 1;
  T eps = 0;
  T wd = 0;
};

// The training point y of element i, from x and z.
template <class T>
LLM_HD inline T schedulefree_y(T x, T z, const ScheduleFreeStep<T>& s) {
  return s.one_minus_beta1 * z + s.beta1 * x;
}

template <class T, class S, class G, class O>
LLM_HD inline void schedulefree_update_at(T* x, S* z, S* v, const G& g, const O& y_out, int64_t i,
                                          const ScheduleFreeStep<T>& s) {
  const T gi = g[i];
  const T xi = x[i];
  const T zi = state_load(z[i]);
  const T yi = schedulefree_y(xi, zi, s);
  const T vi = state_put(v[i], s.beta2 * state_load(v[i]) + s.one_minus_beta2 * (gi * gi));
  const T u = gi / (std::sqrt(vi / s.bc2) + s.eps) + s.wd * yi;
  const T zn = state_put(z[i], zi - s.lr * u);
  const T xn = xi + s.ckp1 * (zn - xi);
  x[i] = xn;
  y_out.put(i, schedulefree_y(xn, zn, s));
}

// y from the current x and z (after a load, or to go back to training after an evaluation at x).
template <class T, class S, class O>
LLM_HD inline void schedulefree_y_at(const T* x, const S* z, const O& y_out, int64_t i,
                                     const ScheduleFreeStep<T>& s) {
  y_out.put(i, schedulefree_y(x[i], state_load(z[i]), s));
}

}  // namespace ledgerlm
