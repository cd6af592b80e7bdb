// AdEMAMix (Pagliardini et al. 2024, "The AdEMAMix Optimizer: Better, Faster, Older"), per
// element, in the order of the authors' code: Adam's fast first moment m1 and second moment nu,
// plus a slow first moment m2 (beta3 close to 1) mixed in with weight alpha:
//   m1 = beta1*m1 + (1-beta1)*g;  m2 = beta3*m2 + (1-beta3)*g;  nu = beta2*nu + (1-beta2)*g^2
//   w -= lr * ((m1/bc1 + alpha*m2) / (sqrt(nu)/sqrt(bc2) + eps) + wd*w)
// alpha and beta3 warm up over the run (optim/ademamix.cpp); bc = 1 - beta^t.
#pragma once

#include <cmath>
#include <cstdint>

#include "model/backend/optim/optim_kernels.h"

namespace ledgerlm {

template <class T>
struct AdEMAMixStep {
  T beta1 = 0, one_minus_beta1 = 1;
  T beta2 = 0, one_minus_beta2 = 1;
  T beta3 = 0, one_minus_beta3 = 1;
  T bc1 = 1, bc2_sqrt = 1;  // 1 - beta1^t, sqrt(1 - beta2^t)
  T alpha = 0, eps = 0, wd = 0, lr = 0;
};

template <class T, class S, class G>
LLM_HD inline void ademamix_update_at(T* w, S* m1, S* nu, S* m2, const G& g, int64_t i,
                                      const AdEMAMixStep<T>& s) {
  const T gi = g[i];
  const T a = state_put(m1[i], s.beta1 * state_load(m1[i]) + s.one_minus_beta1 * gi);
  const T b = state_put(m2[i], s.beta3 * state_load(m2[i]) + s.one_minus_beta3 * gi);
  const T v = state_put(nu[i], s.beta2 * state_load(nu[i]) + s.one_minus_beta2 * (gi * gi));
  const T denom = std::sqrt(v) / s.bc2_sqrt + s.eps;
  const T update = (a / s.bc1 + s.alpha * b) / denom + s.wd * w[i];
  w[i] = w[i] - s.lr * update;
}

}  // namespace ledgerlm
