// Per-tensor kernels for the optimizers that need tensor-wide quantities: LAMB and LARS (trust
// ratios from norms) and Adafactor (factored second moment, RMS clipping). Templated over the
// scalar type T and the storage type S of parameter-shaped state (m, v, momentum) like kernels.h;
// Adafactor's factored row/column statistics are always T. Wherever a phase derives a norm from
// state it has just updated, it uses the value as stored, which is what the next phase reads.
//
// Every algorithm is split into phases around its reductions: a phase returns partial sums over
// the elements it was given (a slice of a tensor on this rank), the caller adds the partials of
// all ranks (OptimStepInfo::reduce), and the next phase uses the totals. The *_update helpers run
// the phases back to back for a tensor held whole, which is what the double-precision tests use.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/backend/optim/optim_kernels.h"

namespace ledgerlm {

// ---- LAMB (arXiv 1904.00962) -------------------------------------------------------------------
// m, v as Adam; r = m_hat/(sqrt(v_hat)+eps) + wd*w; w -= lr * phi(||w||)/||r|| * r.
template <class T>
struct LambStep {
  T beta1 = 0, one_minus_beta1 = 1;
  T beta2 = 0, one_minus_beta2 = 1;
  T bc1 = 1, bc2 = 1;  // 1 - beta^t
  T eps = 0;
  T wd = 0;
};

template <class T>
LambStep<T> lamb_step_make(double beta1, double beta2, double eps, double wd, int64_t step) {
  LambStep<T> s;
  const double t = static_cast<double>(step);
  s.beta1 = static_cast<T>(beta1);
  s.one_minus_beta1 = static_cast<T>(1.0 - beta1);
  s.beta2 = static_cast<T>(beta2);
  s.one_minus_beta2 = static_cast<T>(1.0 - beta2);
  s.bc1 = static_cast<T>(1.0 - std::pow(beta1, t));
  s.bc2 = static_cast<T>(1.0 - std::pow(beta2, t));
  s.eps = static_cast<T>(eps);
  s.wd = static_cast<T>(wd);
  return s;
}

template <class T>
LLM_HD inline T lamb_elem_m(T m, T g, const LambStep<T>& s) {
  return T(s.beta1 * m + s.one_minus_beta1 * g);
}
template <class T>
LLM_HD inline T lamb_elem_v(T v, T g, const LambStep<T>& s) {
  return T(s.beta2 * v + s.one_minus_beta2 * (g * g));
}
template <class T>
LLM_HD inline T lamb_elem_r(T w, T m, T v, const LambStep<T>& s) {
  return (m / s.bc1) / (std::sqrt(v / s.bc2) + s.eps) + s.wd * w;
}

// Phase 1: moments; returns {sum w^2, sum r^2} over these elements.
// Element i: updates m and v, adds w^2 and r^2 into acc[0], acc[1] (host and device).
template <class T, class S, class G, class Acc>
LLM_HD inline void lamb_moments_at(const T* w, S* m, S* v, const G& g, int64_t i,
                                   const LambStep<T>& s, Acc& acc) {
  const T gi = g[i];
  const T mi = state_put(m[i], lamb_elem_m<T>(state_load(m[i]), gi, s));
  const T vi = state_put(v[i], lamb_elem_v<T>(state_load(v[i]), gi, s));
  const double wi = static_cast<double>(w[i]);
  const double r = static_cast<double>(lamb_elem_r(w[i], mi, vi, s));
  acc[0] += wi * wi;
  acc[1] += r * r;
}
template <class T, class S, class G>
std::array<double, 2> lamb_phase_moments(const T* w, S* m, S* v, const G& g, int64_t n,
                                         const LambStep<T>& s) {
  return optim_chunked_sums<2>(
      n, [&](int64_t i, std::array<double, 2>& acc) { lamb_moments_at(w, m, v, g, i, s, acc); });
}

// phi(||w||)/||r||, 1 when either norm is 0. clamp_lo/hi < 0: phi is the identity.
inline double lamb_trust_ratio(double w_norm, double r_norm, bool clamp, double lo, double hi) {
  if (w_norm == 0.0 || r_norm == 0.0) return 1.0;
  const double phi = clamp ? std::clamp(w_norm, lo, hi) : w_norm;
  return phi / r_norm;
}

// Phase 2: w -= scale * r with scale = lr * trust.
template <class T, class S>
LLM_HD inline void lamb_apply_at(T* w, const S* m, const S* v, int64_t i, const LambStep<T>& s,
                                 T scale) {
  w[i] = w[i] - scale * lamb_elem_r<T>(w[i], state_load(m[i]), state_load(v[i]), s);
}
template <class T, class S>
void lamb_phase_apply(T* w, const S* m, const S* v, int64_t n, const LambStep<T>& s, T scale) {
#pragma omp parallel for simd schedule(static) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < n; ++i) lamb_apply_at(w, m, v, i, s, scale);
}

// Whole tensor on one rank.
template <class T, class S, class G>
void lamb_update(T* w, S* m, S* v, const G& g, int64_t n, const LambStep<T>& s, double lr,
                 bool clamp, double lo, double hi) {
  const auto sums = lamb_phase_moments(w, m, v, g, n, s);
  const double trust = lamb_trust_ratio(std::sqrt(sums[0]), std::sqrt(sums[1]), clamp, lo, hi);
  lamb_phase_apply(w, m, v, n, s, static_cast<T>(lr * trust));
}

// ---- LARS (arXiv 1708.03888) -------------------------------------------------------------------
// local = eta*||w|| / (||g|| + wd*||w||) (1 if a norm is 0); v = mu*v + lr*local*(g + wd*w);
// w -= v.
template <class T, class G, class Acc>
LLM_HD inline void lars_norms_at(const T* w, const G& g, int64_t i, Acc& acc) {
  const double wi = static_cast<double>(w[i]);
  const double gi = static_cast<double>(g[i]);
  acc[0] += wi * wi;
  acc[1] += gi * gi;
}
template <class T, class G>
std::array<double, 2> lars_phase_norms(const T* w, const G& g, int64_t n) {
  return optim_chunked_sums<2>(
      n, [&](int64_t i, std::array<double, 2>& acc) { lars_norms_at(w, g, i, acc); });
}

inline double lars_local_lr(double w_norm, double g_norm, double eta, double wd) {
  if (w_norm == 0.0 || g_norm == 0.0) return 1.0;
  return eta * w_norm / (g_norm + wd * w_norm);
}

template <class T>
struct LarsStep {
  T momentum = 0;
  T wd = 0;
  T scaled_lr = 0;  // lr * local
};

template <class T>
LLM_HD inline T lars_elem_buf(T buf, T g, T w, const LarsStep<T>& s) {
  return T(s.momentum * buf + s.scaled_lr * (g + s.wd * w));
}

template <class T, class S, class G>
LLM_HD inline void lars_apply_at(T* w, S* buf, const G& g, int64_t i, const LarsStep<T>& s) {
  const T b = state_put(buf[i], lars_elem_buf<T>(state_load(buf[i]), g[i], w[i], s));
  w[i] = w[i] - b;
}
template <class T, class S, class G>
void lars_phase_apply(T* w, S* buf, const G& g, int64_t n, const LarsStep<T>& s) {
#pragma omp parallel for simd schedule(static) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < n; ++i) lars_apply_at(w, buf, g, i, s);
}

template <class T, class S, class G>
void lars_update(T* w, S* buf, const G& g, int64_t n, double lr, double momentum, double wd,
                 double eta, bool use_trust) {
  double local = 1.0;
  if (use_trust) {
    const auto sums = lars_phase_norms(w, g, n);
    local = lars_local_lr(std::sqrt(sums[0]), std::sqrt(sums[1]), eta, wd);
  }
  lars_phase_apply(
      w, buf, g, n,
      LarsStep<T>{static_cast<T>(momentum), static_cast<T>(wd), static_cast<T>(lr * local)});
}

// ---- Adafactor (arXiv 1804.04235) --------------------------------------------------------------
// Matrices (rows x cols, the last dim being cols) keep row sums R and column sums C of G^2 + eps1;
// V_hat = R C^T / sum(R). Vectors keep V. U = G/sqrt(V_hat); U_hat = U / max(1, RMS(U)/d);
// w -= alpha * U_hat (or its beta1 running mean), alpha = max(eps2, RMS(w_prev)) * rho.
//
// A slice of a matrix is elements [p0, p0+n) of the row-major tensor.
template <class T>
struct AdafactorStep {
  T beta2 = 0, one_minus_beta2 = 1;  // beta2_t = 1 - t^(-decay_rate)
  T eps1 = 0;
  T beta1 = 0, one_minus_beta1 = 1;  // beta1 == 0: no momentum
  T decay = 1;                       // decoupled weight decay factor
};

// g^2 + eps1 in double: what the factored statistics sum.
template <class T, class V>
LLM_HD inline double adafactor_elem_sq(V g, const AdafactorStep<T>& s) {
  const double gi = static_cast<double>(g);
  return gi * gi + static_cast<double>(s.eps1);
}

// Phase 1 (matrix): adds the slice's row and column sums of g^2+eps1 into row_acc[rows] and
// col_acc[cols]; returns sum w^2 over the slice. Rows are independent (parallel over rows), and
// the column sums walk the rows in order, so the result is deterministic.
template <class T, class G>
double adafactor_phase_factored_sums(const T* w, const G& g, int64_t p0, int64_t n, int64_t cols,
                                     const AdafactorStep<T>& s, double* row_acc, double* col_acc) {
  const int64_t r0 = p0 / cols, r1 = (p0 + n + cols - 1) / cols;
  auto sq = [&](int64_t i) { return adafactor_elem_sq(g[i], s); };
#pragma omp parallel for schedule(static) if (n >= kOptimParallelMin)
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t lo = std::max(p0, r * cols), hi = std::min(p0 + n, (r + 1) * cols);
    double acc = 0.0;
    for (int64_t p = lo; p < hi; ++p) acc += sq(p - p0);
    row_acc[r] += acc;
  }
  constexpr int64_t kColBlock = 64;
  const int64_t col_blocks = (cols + kColBlock - 1) / kColBlock;
#pragma omp parallel for schedule(static) if (n >= kOptimParallelMin)
  for (int64_t cb = 0; cb < col_blocks; ++cb) {
    const int64_t c0 = cb * kColBlock, c1 = std::min(cols, c0 + kColBlock);
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t p = r * cols + c;
        if (p >= p0 && p < p0 + n) col_acc[c] += sq(p - p0);
      }
  }
  return optim_chunked_sums<1>(n, [&](int64_t i, std::array<double, 1>& acc) {
    const double wi = static_cast<double>(w[i]);
    acc[0] += wi * wi;
  })[0];
}

// After the reduce (matrix): R = beta2*R + (1-beta2)*row_sum, same for C. Every rank holding a
// slice keeps the full R and C. Returns sum(R) in double.
template <class T>
double adafactor_factored_fold(T* row, T* col, int64_t rows, int64_t cols, const double* row_sum,
                               const double* col_sum, const AdafactorStep<T>& s) {
  double total = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    row[r] = s.beta2 * row[r] + s.one_minus_beta2 * static_cast<T>(row_sum[r]);
    total += static_cast<double>(row[r]);
  }
  for (int64_t c = 0; c < cols; ++c)
    col[c] = s.beta2 * col[c] + s.one_minus_beta2 * static_cast<T>(col_sum[c]);
  return total;
}

// U for element p of a matrix: g / sqrt(R_r/sum(R) * C_c); row_frac[r] = R_r/sum(R) (a ratio in
// [0,1], so fp32 never underflows on the product of two tiny sums).
template <class T>
LLM_HD inline T adafactor_elem_u_factored(T g, T row_frac, T col) {
  return g / std::sqrt(row_frac * col);
}

template <class T>
LLM_HD inline T adafactor_elem_v(T v, T g, const AdafactorStep<T>& s) {
  return T(s.beta2 * v + s.one_minus_beta2 * (g * g + s.eps1));
}

// Phase 1 (vector): v = beta2*v + (1-beta2)*(g^2+eps1); returns {sum w^2, sum U^2}.
template <class T, class S, class G, class Acc>
LLM_HD inline void adafactor_vector_at(const T* w, S* v, const G& g, int64_t i,
                                       const AdafactorStep<T>& s, Acc& acc) {
  const T gi = g[i];
  const T vi = state_put(v[i], adafactor_elem_v<T>(state_load(v[i]), gi, s));
  const double wi = static_cast<double>(w[i]);
  const double u = static_cast<double>(gi / std::sqrt(vi));
  acc[0] += wi * wi;
  acc[1] += u * u;
}
template <class T, class S, class G>
std::array<double, 2> adafactor_phase_vector(const T* w, S* v, const G& g, int64_t n,
                                             const AdafactorStep<T>& s) {
  return optim_chunked_sums<2>(
      n, [&](int64_t i, std::array<double, 2>& acc) { adafactor_vector_at(w, v, g, i, s, acc); });
}

// Phase 2 (matrix): sum U^2 over the slice.
template <class T, class G, class Acc>
LLM_HD inline void adafactor_factored_u2_at(const G& g, int64_t i, int64_t p0, int64_t cols,
                                            const T* row_frac, const T* col, Acc& acc) {
  const int64_t p = p0 + i;
  const double u =
      static_cast<double>(adafactor_elem_u_factored(g[i], row_frac[p / cols], col[p % cols]));
  acc[0] += u * u;
}
template <class T, class G>
double adafactor_phase_factored_u2(const G& g, int64_t p0, int64_t n, int64_t cols,
                                   const T* row_frac, const T* col) {
  return optim_chunked_sums<1>(n, [&](int64_t i, std::array<double, 1>& acc) {
    adafactor_factored_u2_at(g, i, p0, cols, row_frac, col, acc);
  })[0];
}

// The update scale: U_hat = U * u_scale with u_scale = 1/max(1, RMS(U)/d); step = alpha.
template <class T, class S>
LLM_HD inline void adafactor_elem_apply(T& w, S* m, T u, T u_scale, T alpha,
                                        const AdafactorStep<T>& s) {
  T step = u * u_scale;
  if (m) step = state_put(*m, T(s.beta1 * state_load(*m) + s.one_minus_beta1 * step));
  w = w * s.decay - alpha * step;
}

// Phase 3 (matrix slice). `m` may be null (no momentum).
template <class T, class S, class G>
LLM_HD inline void adafactor_apply_factored_at(T* w, S* m, const G& g, int64_t i, int64_t p0,
                                               int64_t cols, const T* row_frac, const T* col,
                                               T u_scale, T alpha, const AdafactorStep<T>& s) {
  const int64_t p = p0 + i;
  const T u = adafactor_elem_u_factored(g[i], row_frac[p / cols], col[p % cols]);
  adafactor_elem_apply(w[i], m ? m + i : static_cast<S*>(nullptr), u, u_scale, alpha, s);
}
template <class T, class S, class G>
void adafactor_phase_apply_factored(T* w, S* m, const G& g, int64_t p0, int64_t n, int64_t cols,
                                    const T* row_frac, const T* col, T u_scale, T alpha,
                                    const AdafactorStep<T>& s) {
#pragma omp parallel for schedule(static) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < n; ++i)
    adafactor_apply_factored_at(w, m, g, i, p0, cols, row_frac, col, u_scale, alpha, s);
}

// Phase 3 (vector).
template <class T, class S, class G>
LLM_HD inline void adafactor_apply_vector_at(T* w, S* m, const S* v, const G& g, int64_t i,
                                             T u_scale, T alpha, const AdafactorStep<T>& s) {
  const T u = g[i] / std::sqrt(T(state_load(v[i])));
  adafactor_elem_apply(w[i], m ? m + i : static_cast<S*>(nullptr), u, u_scale, alpha, s);
}
template <class T, class S, class G>
void adafactor_phase_apply_vector(T* w, S* m, const S* v, const G& g, int64_t n, T u_scale, T alpha,
                                  const AdafactorStep<T>& s) {
#pragma omp parallel for schedule(static) if (n >= kOptimParallelMin)
  for (int64_t i = 0; i < n; ++i) adafactor_apply_vector_at(w, m, v, g, i, u_scale, alpha, s);
}

// Scalars of one Adafactor step for one tensor, from the reduced sums.
struct AdafactorScalars {
  double alpha = 0.0;    // max(eps2, RMS(w)) * rho
  double u_scale = 1.0;  // 1 / max(1, RMS(U)/d)
};
inline AdafactorScalars adafactor_scalars(double sum_w2, double sum_u2, int64_t numel, double rho,
                                          double eps2, double d) {
  const double n = static_cast<double>(numel);
  AdafactorScalars a;
  a.alpha = std::max(eps2, std::sqrt(sum_w2 / n)) * rho;
  a.u_scale = 1.0 / std::max(1.0, std::sqrt(sum_u2 / n) / d);
  return a;
}

// beta2_t = 1 - t^(-decay_rate); rho_t = min(1e-2, 1/sqrt(t)) for the relative step.
inline double adafactor_beta2(int64_t step, double decay_rate) {
  return 1.0 - std::pow(static_cast<double>(step), -decay_rate);
}
inline double adafactor_relative_rho(int64_t step) {
  return std::min(1e-2, 1.0 / std::sqrt(static_cast<double>(step)));
}

// Whole matrix (rows x cols) on one rank; `m` may be null.
template <class T, class S, class G>
void adafactor_update_matrix(T* w, T* row, T* col, S* m, const G& g, int64_t rows, int64_t cols,
                             const AdafactorStep<T>& s, double rho, double eps2, double d) {
  const int64_t n = rows * cols;
  std::vector<double> rs(static_cast<size_t>(rows)), cs(static_cast<size_t>(cols));
  const double sum_w2 = adafactor_phase_factored_sums(w, g, 0, n, cols, s, rs.data(), cs.data());
  const double sum_r = adafactor_factored_fold(row, col, rows, cols, rs.data(), cs.data(), s);
  std::vector<T> frac(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) frac[r] = static_cast<T>(static_cast<double>(row[r]) / sum_r);
  const double sum_u2 = adafactor_phase_factored_u2(g, 0, n, cols, frac.data(), col);
  const auto a = adafactor_scalars(sum_w2, sum_u2, n, rho, eps2, d);
  adafactor_phase_apply_factored(w, m, g, 0, n, cols, frac.data(), col, static_cast<T>(a.u_scale),
                                 static_cast<T>(a.alpha), s);
}

}  // namespace ledgerlm
