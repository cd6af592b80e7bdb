// Per-tensor update kernels for SGD and AdamW, templated over the scalar type T so that the fp32
// optimizers and the double-precision known-answer tests run the same arithmetic, and over the
// storage type S of the state that mirrors the parameters (T itself, or bf16: see StateBF16).
//
// Each algorithm is split into per-element stages (weight decay, state update, parameter update).
// The loop / foreach / fused implementations only differ in how they schedule these stages over
// tensors, never in the arithmetic: every stage reads its inputs from the arrays the previous stage
// wrote, and the fused kernels use exactly the value that was stored (after rounding, for bf16
// state), so all three give bit-identical results. Gradients are read
// through a view that widens bf16/fp16 and multiplies by the step's grad_scale on the fly.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/base/hd.h"

namespace ledgerlm {

// Below this many elements a kernel runs on one thread: forking costs more than it saves.
constexpr int64_t kOptimParallelMin = 1 << 15;

// ---- gradient views ---------------------------------------------------------------------------
// g[i] = widen(raw[i]) * scale, in T.
template <class T, class S>
struct GradView {
  const S* p;
  T scale;
  LLM_HD T operator[](int64_t i) const { return static_cast<T>(p[i]) * scale; }
  LLM_HD GradView shifted(int64_t k) const { return {p + k, scale}; }
};
struct GradViewBF16 {
  const uint16_t* p;
  float scale;
  LLM_HD float operator[](int64_t i) const { return bf16_to_f32(p[i]) * scale; }
  LLM_HD GradViewBF16 shifted(int64_t k) const { return {p + k, scale}; }
};
struct GradViewF16 {
  const uint16_t* p;
  float scale;
  LLM_HD float operator[](int64_t i) const { return f16_to_f32(p[i]) * scale; }
  LLM_HD GradViewF16 shifted(int64_t k) const { return {p + k, scale}; }
};

// Calls fn(view) with the fp32 view matching grads.dtype.
template <class Fn>
void optim_with_grad_view(Tensor grads, double scale, Fn&& fn) {
  const float s = static_cast<float>(scale);
  switch (grads.dtype) {
    case DType::kF32:
      fn(GradView<float, float>{grads.as<const float>(), s});
      return;
    case DType::kF64:
      fn(GradView<float, double>{grads.as<const double>(), s});
      return;
    case DType::kBF16:
      fn(GradViewBF16{grads.as<const uint16_t>(), s});
      return;
    case DType::kF16:
      fn(GradViewF16{grads.as<const uint16_t>(), s});
      return;
    default:
      fail(error_message("optimizer: gradients must be fp32, fp64, bf16 or fp16 (got ",
                         dtype_name(grads.dtype), ")"));
  }
}

// ---- state storage ------------------------------------------------------------------------------
// State is either stored as T (state_load / state_put are plain reads and writes) or as bf16:
// loaded and widened to fp32, updated in fp32, rounded to nearest even on store. state_put returns
// the value that was stored (widened back), which is what a later stage would read, so a fused
// pass and a staged pass see the same numbers. A distinct type (not uint16_t) keeps bf16 state
// from being confused with fp16 or raw integers.
struct StateBF16 {
  uint16_t bits;
};
static_assert(sizeof(StateBF16) == 2, "StateBF16 must be stored as exactly two bytes");

template <class T>
LLM_HD inline T state_load(const T& x) {
  return x;
}
LLM_HD inline float state_load(const StateBF16& x) {
  return bf16_to_f32(x.bits);
}
template <class T>
LLM_HD inline T state_put(T& dst, T x) {
  dst = x;
  return x;
}
LLM_HD inline float state_put(StateBF16& dst, float x) {
  dst.bits = f32_to_bf16(x);
  return bf16_to_f32(dst.bits);
}

// Calls fn(ptr) with `data` typed as the state storage for `dtype` (float* or StateBF16*).
template <class Fn>
void optim_with_state(void* data, DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32:
      fn(static_cast<float*>(data));
      return;
    case DType::kBF16:
      fn(static_cast<StateBF16*>(data));
      return;
    default:
      fail(error_message("optimizer: state must be fp32 or bf16 (got ", dtype_name(dtype), ")"));
  }
}

// ---- deterministic partial sums -----------------------------------------------------------------
// K sums over i in [0, n) of term(i, acc), accumulated in double. Fixed-size chunks are summed in
// parallel and then combined in chunk order, so the result does not depend on the thread count.
constexpr int64_t kOptimSumChunk = 8192;
template <int K, class F>
std::array<double, K> optim_chunked_sums(int64_t n, F&& term) {
  const int64_t chunks = (n + kOptimSumChunk - 1) / kOptimSumChunk;
  std::array<double, K> total{};
  if (chunks <= 1) {
    for (int64_t i = 0; i < n; ++i) term(i, total);
    return total;
  }
  std::vector<std::array<double, K>> part(static_cast<size_t>(chunks));
#pragma omp parallel for schedule(static) if (n >= kOptimParallelMin)
  for (int64_t c = 0; c < chunks; ++c) {
    std::array<double, K> acc{};
    const int64_t hi = std::min(n, (c + 1) * kOptimSumChunk);
    for (int64_t i = c * kOptimSumChunk; i < hi; ++i) term(i, acc);
    part[static_cast<size_t>(c)] = acc;
  }
  for (const auto& a : part)
    for (int k = 0; k < K; ++k) total[k] += a[k];
  return total;
}

// ---- SGD ----------------------------------------------------------------------------------------
// Torch semantics (dampening 0): buf = mu*buf + g (buf starts at 0, so the first step gives
// buf = g exactly); nesterov: d = g + mu*buf else d = buf; w -= lr*d. wd_mode l2 adds wd*w to g;
// decoupled scales w by (1 - lr*wd) first.
template <class T>
struct SgdStep {
  T lr = 0;
  T momentum = 0;  // 0: plain SGD, no buffer
  T l2 = 0;        // wd for wd_mode l2, else 0
  T decay = 1;     // 1 - lr*wd for decoupled, else 1
  bool nesterov = false;
};

template <class T>
LLM_HD inline T sgd_elem_grad(T g, T w, const SgdStep<T>& s) {
  return s.l2 != T(0) ? g + s.l2 * w : g;
}
template <class T>
LLM_HD inline T sgd_elem_buf(T buf, T g, const SgdStep<T>& s) {
  return s.momentum * buf + g;
}
template <class T>
LLM_HD inline T sgd_elem_param(T w, T g, T buf, const SgdStep<T>& s) {
  const T d = s.momentum == T(0) ? g : (s.nesterov ? g + s.momentum * buf : buf);
  return w - s.lr * d;
}

// Element i of each stage (the loops below and the CUDA kernels call these).
template <class T>
LLM_HD inline void sgd_decay_at(T* w, int64_t i, const SgdStep<T>& s) {
  w[i] = w[i] * s.decay;
}
template <class T, class S, class G>
LLM_HD inline void sgd_buf_at(const T* w, S* buf, const G& g, int64_t i, const SgdStep<T>& s) {
  state_put(buf[i], sgd_elem_buf<T>(state_load(buf[i]), sgd_elem_grad<T>(g[i], w[i], s), s));
}
template <class T, class S, class G>
LLM_HD inline void sgd_param_at(T* w, const S* buf, const G& g, int64_t i, const SgdStep<T>& s) {
  w[i] =
      sgd_elem_param<T>(w[i], sgd_elem_grad<T>(g[i], w[i], s), buf ? state_load(buf[i]) : T(0), s);
}
// The fused pass without momentum (no buffer) and with it.
template <class T, class G>
LLM_HD inline void sgd_update_plain_at(T* w, const G& g, int64_t i, const SgdStep<T>& s) {
  const T wd = w[i] * s.decay;
  w[i] = sgd_elem_param(wd, sgd_elem_grad<T>(g[i], wd, s), T(0), s);
}
template <class T, class S, class G>
LLM_HD inline void sgd_update_momentum_at(T* w, S* buf, const G& g, int64_t i,
                                          const SgdStep<T>& s) {
  const T wd = s.decay == T(1) ? w[i] : w[i] * s.decay;
  const T gi = sgd_elem_grad<T>(g[i], wd, s);
  const T b = state_put(buf[i], sgd_elem_buf<T>(state_load(buf[i]), gi, s));
  w[i] = sgd_elem_param(wd, gi, b, s);
}

// Stage 1: decoupled weight decay.
template <class T>
void sgd_stage_decay(T* w, int64_t n, const SgdStep<T>& s) {
  if (s.decay == T(1)) return;
  for (int64_t i = 0; i < n; ++i) sgd_decay_at(w, i, s);
}
// Stage 2: momentum buffer.
template <class T, class S, class G>
void sgd_stage_buf(const T* w, S* buf, const G& g, int64_t n, const SgdStep<T>& s) {
  if (s.momentum == T(0)) return;
  for (int64_t i = 0; i < n; ++i) sgd_buf_at(w, buf, g, i, s);
}
// Stage 3: parameter update (re-derives g from the gradient, as stage 2 did).
template <class T, class S, class G>
void sgd_stage_param(T* w, const S* buf, const G& g, int64_t n, const SgdStep<T>& s) {
  for (int64_t i = 0; i < n; ++i) sgd_param_at(w, buf, g, i, s);
}
// All stages in one parallel, vectorisable pass. `buf` may be null when momentum == 0.
template <class T, class S, class G>
void sgd_update(T* w, S* buf, const G& g, int64_t n, const SgdStep<T>& s) {
  if (s.momentum == T(0)) {
#pragma omp parallel for simd schedule(static) if (n >= kOptimParallelMin)
    for (int64_t i = 0; i < n; ++i) sgd_update_plain_at(w, g, i, s);
    return;
  }
#pragma omp parallel for simd schedule(static) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < n; ++i) sgd_update_momentum_at(w, buf, g, i, s);
}

// ---- AdamW --------------------------------------------------------------------------------------
// Torch AdamW: w *= 1 - lr*wd; m = b1*m + (1-b1)*g; v = b2*v + (1-b2)*g*g;
// w -= (lr/bc1) * m / (sqrt(v)/sqrt(bc2) + eps), bc = 1 - beta^t.
template <class T>
struct AdamWStep {
  T decay = 1;  // 1 - lr*wd
  T beta1 = 0, one_minus_beta1 = 1;
  T beta2 = 0, one_minus_beta2 = 1;
  T step_size = 0;  // lr / (1 - beta1^t)
  T bc2_sqrt = 1;   // sqrt(1 - beta2^t)
  T eps = 0;
};

// Derives the per-step constants in double, then rounds them to T once.
template <class T>
AdamWStep<T> adamw_step_make(double lr, double beta1, double beta2, double eps, double wd,
                             int64_t step) {
  AdamWStep<T> s;
  const double t = static_cast<double>(step);
  s.decay = static_cast<T>(1.0 - lr * wd);
  s.beta1 = static_cast<T>(beta1);
  s.one_minus_beta1 = static_cast<T>(1.0 - beta1);
  s.beta2 = static_cast<T>(beta2);
  s.one_minus_beta2 = static_cast<T>(1.0 - beta2);
  s.step_size = static_cast<T>(lr / (1.0 - std::pow(beta1, t)));
  s.bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(beta2, t)));
  s.eps = static_cast<T>(eps);
  return s;
}

template <class T>
LLM_HD inline T adamw_elem_m(T m, T g, const AdamWStep<T>& s) {
  return s.beta1 * m + s.one_minus_beta1 * g;
}
template <class T>
LLM_HD inline T adamw_elem_v(T v, T g, const AdamWStep<T>& s) {
  return s.beta2 * v + s.one_minus_beta2 * (g * g);
}
template <class T>
LLM_HD inline T adamw_elem_param(T w, T m, T v, const AdamWStep<T>& s) {
  const T denom = std::sqrt(v) / s.bc2_sqrt + s.eps;
  return w - s.step_size * (m / denom);
}

// Element i of each stage (the loops below and the CUDA kernels call these).
template <class T>
LLM_HD inline void adamw_decay_at(T* w, int64_t i, const AdamWStep<T>& s) {
  w[i] = w[i] * s.decay;
}
template <class T, class S, class G>
LLM_HD inline void adamw_moments_at(S* m, S* v, const G& g, int64_t i, const AdamWStep<T>& s) {
  const T gi = g[i];
  state_put(m[i], adamw_elem_m<T>(state_load(m[i]), gi, s));
  state_put(v[i], adamw_elem_v<T>(state_load(v[i]), gi, s));
}
template <class T, class S>
LLM_HD inline void adamw_param_at(T* w, const S* m, const S* v, int64_t i, const AdamWStep<T>& s) {
  w[i] = adamw_elem_param<T>(w[i], state_load(m[i]), state_load(v[i]), s);
}
template <class T, class S, class G>
LLM_HD inline void adamw_update_at(T* w, S* m, S* v, const G& g, int64_t i, const AdamWStep<T>& s) {
  const T gi = g[i];
  const T mi = state_put(m[i], adamw_elem_m<T>(state_load(m[i]), gi, s));
  const T vi = state_put(v[i], adamw_elem_v<T>(state_load(v[i]), gi, s));
  const T wd = s.decay == T(1) ? w[i] : w[i] * s.decay;
  w[i] = adamw_elem_param(wd, mi, vi, s);
}

template <class T>
void adamw_stage_decay(T* w, int64_t n, const AdamWStep<T>& s) {
  if (s.decay == T(1)) return;
  for (int64_t i = 0; i < n; ++i) adamw_decay_at(w, i, s);
}
template <class T, class S, class G>
void adamw_stage_moments(S* m, S* v, const G& g, int64_t n, const AdamWStep<T>& s) {
  for (int64_t i = 0; i < n; ++i) adamw_moments_at<T>(m, v, g, i, s);
}
template <class T, class S>
void adamw_stage_param(T* w, const S* m, const S* v, int64_t n, const AdamWStep<T>& s) {
  for (int64_t i = 0; i < n; ++i) adamw_param_at(w, m, v, i, s);
}
// All stages in one parallel, vectorisable pass; the update uses the moments as stored.
template <class T, class S, class G>
void adamw_update(T* w, S* m, S* v, const G& g, int64_t n, const AdamWStep<T>& s) {
#pragma omp parallel for simd schedule(static) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < n; ++i) adamw_update_at(w, m, v, g, i, s);
}

}  // namespace ledgerlm
