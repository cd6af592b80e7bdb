// The element-wise halves of Muon (Jordan et al. 2024; torch.optim.Muon's order), around the
// Newton–Schulz orthogonalisation of each matrix's update (optim/muon_newton_schulz.h):
//   momentum: buf = lerp(buf, g, 1-mu); u = nesterov ? lerp(g, buf, mu) : buf   (u in fp32)
//   apply:    w = w*(1 - lr*wd) - lr_adjusted * O    (O = the orthogonalised u)
// Both are written as torch's lerp computes them (weight >= 0.5: end - (end-start)*(1-weight)).
#pragma once

#include <cstdint>

#include "model/backend/optim/optim_kernels.h"

namespace ledgerlm {

template <class T>
struct MuonStep {
  T momentum = 0, one_minus_momentum = 1;
  bool nesterov = true;
  T decay = 1;  // 1 - lr*wd
  T lr = 0;     // the shape-adjusted LR of this matrix
};

// torch.lerp(start, end, weight).
template <class T>
LLM_HD inline T muon_lerp(T start, T end, T weight) {
  return weight < T(0.5) ? start + weight * (end - start) : end - (end - start) * (T(1) - weight);
}

template <class T, class S, class G, class O>
LLM_HD inline void muon_momentum_at(S* buf, const G& g, const O& u_out, int64_t i,
                                    const MuonStep<T>& s) {
  const T gi = g[i];
  const T b = state_put(buf[i], muon_lerp(state_load(buf[i]), gi, s.one_minus_momentum));
  u_out.put(i, s.nesterov ? muon_lerp(gi, b, s.momentum) : b);
}

// `o` is the orthogonalised update, read through a gradient view (fp32, scale 1).
template <class T, class G>
LLM_HD inline void muon_apply_at(T* w, const G& o, int64_t i, const MuonStep<T>& s) {
  const T wd = s.decay == T(1) ? w[i] : w[i] * s.decay;
  w[i] = wd - s.lr * o[i];
}

}  // namespace ledgerlm
