// Causal multi-head self-attention on the fused qkv projection, flash-style.
//
// Layout: qkv [B, T, 3C] with q at columns [0, C), k at [C, 2C), v at [2C, 3C); head h uses
// columns h*hd .. (h+1)*hd of each, hd = C / H. out [B, T, C]. Scores are scaled by 1/sqrt(hd).
//
// Kept for backward: ONLY `out` [B, T, C] and `lse` [B, H, T] (the log-sum-exp of each row of
// scaled scores over keys j <= i, of the softmax BEFORE dropout), both in the activation dtype.
// The T x T probabilities are never stored: backward recomputes p_ij = exp(s_ij - lse_i) from
// q, k and lse, one row at a time in a per-thread buffer of T values (plus this head's K and V
// transposed, 2 x hd x T values, so a query's scores vectorise over keys).
//
// Dropout (args.dropout = p > 0) multiplies p_ij by m_ij = keep_ij / (1 - p) after the softmax.
// keep_ij is a pure function of (seed, site, index) with index = ((b*H + h)*T + i)*T + j
// (cpu_dropout_bits), so backward reproduces the mask without storing it. Attention and the
// elementwise dropout() share the (seed, kDropout, site) key space: callers give them distinct
// sites.
//
// Backward, with P~ = P * M the dropped probabilities and o_i = sum_j P~_ij v_j:
//   dv_j += P~_ij dout_i,  dP_ij = m_ij (dout_i . v_j),  D_i = dout_i . o_i = sum_j p_ij dP_ij,
//   ds_ij = p_ij (dP_ij - D_i),  dq_i = scale sum_j ds_ij k_j,  dk_j += scale ds_ij q_i.
// Work is split over (b, h): each pair owns its rows of dq, dk, dv, so no two threads write the
// same element and the summation order is fixed (deterministic for any thread count).
//
// Speed: the per-head work is compiled twice, for baseline x86-64 and for AVX-512 (picked at
// run time), and each row's exps run as one vector pass (cpu_simd.cpp) instead of a libm call
// per score; the backward computes a query's probability row before walking its keys.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_simd.h"

namespace ledgerlm::cpu {
namespace {

struct AttnShape {
  int64_t b, t, c, h, hd;
};

AttnShape attention_check(const AttentionArgs& a) {
  LLM_REQUIRE(a.batch >= 0 && a.seq >= 0 && a.channels > 0 && a.heads > 0,
              "cpu backend: attention needs batch, seq >= 0 and channels, heads > 0");
  LLM_REQUIRE(a.channels % a.heads == 0, "cpu backend: attention channels (", a.channels,
              ") must be divisible by heads (", a.heads, ")");
  LLM_REQUIRE(a.dropout >= 0.0 && a.dropout < 1.0,
              "cpu backend: attention dropout must be in [0, 1), got ", a.dropout);
  return {a.batch, a.seq, a.channels, a.heads, a.channels / a.heads};
}

#define LLM_ALWAYS_INLINE __attribute__((always_inline))
#define LLM_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))

// Per-thread scratch elements: rows p, mask and g.v of T values, K and V transposed (hd x T each).
int64_t attention_scratch(const AttnShape& s) {
  return 3 * s.t + 2 * s.hd * s.t;
}

template <class T>
LLM_ALWAYS_INLINE inline T dot(const T* x, const T* y, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

// m[j] = keep_ij / (1 - p) for j in [0, count), index = base + j.
template <class T>
LLM_ALWAYS_INLINE inline void attention_fill_mask(T* m, uint64_t base, int64_t count,
                                                  const AttentionArgs& a) {
  const uint64_t threshold = cpu_dropout_threshold(a.dropout);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - a.dropout));
  std::array<uint32_t, 4> words{};
  for (int64_t j = 0; j < count; ++j) {
    const uint64_t idx = base + static_cast<uint64_t>(j);
    if (j == 0 || (idx & 3) == 0) words = rng_bits(a.seed, RngStream::kDropout, a.site, idx >> 2);
    m[j] = words[idx & 3] >= threshold ? keep_scale : T(0);
  }
}

// dst[d][j] = src[j * stride + d]: one head's keys (or values) as [hd][T] rows, so the scores
// of a query against all keys vectorise over keys without horizontal sums.
template <class T>
LLM_ALWAYS_INLINE inline void transpose_head(const T* src, int64_t stride, int64_t t, int64_t hd,
                                             T* dst) {
  for (int64_t j = 0; j < t; ++j)
    for (int64_t d = 0; d < hd; ++d) dst[d * t + j] = src[j * stride + d];
}

// out[j] = sum_d (mul * x[d]) * xt[d][j] for j in [0, count): summed over d in order.
template <class T>
LLM_ALWAYS_INLINE inline void scores_row(const T* x, const T* xt, int64_t t, int64_t hd,
                                         int64_t count, T mul, T* out) {
  for (int64_t j = 0; j < count; ++j) out[j] = T(0);
  for (int64_t d = 0; d < hd; ++d) {
    const T xd = mul * x[d];
    const T* col = xt + d * t;
#pragma omp simd
    for (int64_t j = 0; j < count; ++j) out[j] += xd * col[j];
  }
}

// x[j] = exp(x[j] * mul - sub) for j in [0, n): the vector exp of cpu_simd.cpp in the AVX-512
// instantiation, std::exp otherwise.
template <class T, bool kAvx512>
LLM_ALWAYS_INLINE inline void exp_row(T* x, int64_t n, T mul, T sub) {
  if constexpr (kAvx512) {
    cpu_exp_affine_avx512(x, n, mul, sub);
  } else {
    for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j] * mul - sub);
  }
}

// One (batch, head) pair of the forward pass; p and mask are per-thread rows of T values.
template <class T, bool kAvx512>
LLM_ALWAYS_INLINE inline void attention_forward_head(T* out, T* lse, const T* qkv,
                                                     const AttentionArgs& a, const AttnShape& s,
                                                     int64_t bh, T* p, T* mask) {
  const int64_t row = 3 * s.c;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
  const int64_t b = bh / s.h, h = bh % s.h;
  const T* base = qkv + b * s.t * row + h * s.hd;
  T* kt = mask + s.t;  // this head's keys transposed, [hd][T]
  transpose_head(base + s.c, row, s.t, s.hd, kt);
  for (int64_t i = 0; i < s.t; ++i) {
    const T* q = base + i * row;
    scores_row(q, kt, s.t, s.hd, i + 1, scale, p);
    T mx = -INFINITY;
    for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, p[j]);
    exp_row<T, kAvx512>(p, i + 1, T(1), mx);
    T sum = 0;
    for (int64_t j = 0; j <= i; ++j) sum += p[j];
    const T inv = T(1) / sum;
    if (drop) {
      attention_fill_mask(mask, static_cast<uint64_t>((bh * s.t + i) * s.t), i + 1, a);
      for (int64_t j = 0; j <= i; ++j) p[j] *= inv * mask[j];
    } else {
      for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
    }
    T* o = out + (b * s.t + i) * s.c + h * s.hd;
    for (int64_t d = 0; d < s.hd; ++d) o[d] = T(0);
    for (int64_t j = 0; j <= i; ++j) {
      const T* v = base + j * row + 2 * s.c;
      const T pj = p[j];
#pragma omp simd
      for (int64_t d = 0; d < s.hd; ++d) o[d] += pj * v[d];
    }
    lse[bh * s.t + i] = mx + std::log(sum);
  }
}

// One (batch, head) pair of the backward pass: it owns this head's rows of dq, dk and dv.
template <class T, bool kAvx512>
LLM_ALWAYS_INLINE inline void attention_backward_head(T* dqkv, const T* dout, const T* qkv,
                                                      const T* out, const T* lse,
                                                      const AttentionArgs& a, const AttnShape& s,
                                                      int64_t bh, T* p, T* mask) {
  const int64_t row = 3 * s.c;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
  const int64_t b = bh / s.h, h = bh % s.h;
  const T* base = qkv + b * s.t * row + h * s.hd;
  T* dbase = dqkv + b * s.t * row + h * s.hd;
  T* gv = mask + s.t;       // g_i . v_j for the current query row
  T* kt = gv + s.t;         // keys transposed, [hd][T]
  T* vt = kt + s.hd * s.t;  // values transposed, [hd][T]
  transpose_head(base + s.c, row, s.t, s.hd, kt);
  transpose_head(base + 2 * s.c, row, s.t, s.hd, vt);
  // dk and dv of this head are sums over queries: clear them, then accumulate.
  for (int64_t j = 0; j < s.t; ++j) {
    T* dk = dbase + j * row + s.c;
    for (int64_t d = 0; d < s.hd; ++d) dk[d] = dk[s.c + d] = T(0);
  }
  for (int64_t i = 0; i < s.t; ++i) {
    const T* q = base + i * row;
    const T* g = dout + (b * s.t + i) * s.c + h * s.hd;
    const T* o = out + (b * s.t + i) * s.c + h * s.hd;
    T* dq = dbase + i * row;
    for (int64_t d = 0; d < s.hd; ++d) dq[d] = T(0);
    const T big_d = dot(g, o, s.hd);
    // The row of probabilities first (scores, then one exp pass), as in the forward, and the
    // row of g . v_j, both vectorised over keys through the transposed K and V.
    scores_row(q, kt, s.t, s.hd, i + 1, scale, p);
    exp_row<T, kAvx512>(p, i + 1, T(1), lse[bh * s.t + i]);
    scores_row(g, vt, s.t, s.hd, i + 1, T(1), gv);
    if (drop) attention_fill_mask(mask, static_cast<uint64_t>((bh * s.t + i) * s.t), i + 1, a);
    for (int64_t j = 0; j <= i; ++j) {
      const T* k = base + j * row + s.c;
      T* dk = dbase + j * row + s.c;
      T* dv = dk + s.c;
      const T pj = p[j];
      const T m = drop ? mask[j] : T(1);
      const T pm = pj * m;
      const T dp = m * gv[j];
      const T ds = pj * (dp - big_d) * scale;
#pragma omp simd
      for (int64_t d = 0; d < s.hd; ++d) {
        dv[d] += pm * g[d];
        dq[d] += ds * k[d];
        dk[d] += ds * q[d];
      }
    }
  }
}

// The AVX-512 instantiations: the same code compiled for 512-bit vectors (the Release build
// targets baseline x86-64), chosen per call by cpu_has_avx512().
LLM_TARGET_AVX512 void attention_forward_head_avx512(float* out, float* lse, const float* qkv,
                                                     const AttentionArgs& a, const AttnShape& s,
                                                     int64_t bh, float* p, float* mask) {
  attention_forward_head<float, true>(out, lse, qkv, a, s, bh, p, mask);
}
LLM_TARGET_AVX512 void attention_backward_head_avx512(float* dqkv, const float* dout,
                                                      const float* qkv, const float* out,
                                                      const float* lse, const AttentionArgs& a,
                                                      const AttnShape& s, int64_t bh, float* p,
                                                      float* mask) {
  attention_backward_head<float, true>(dqkv, dout, qkv, out, lse, a, s, bh, p, mask);
}

template <class T>
void attention_forward_impl(T* out, T* lse, const T* qkv, const AttentionArgs& a, T* scratch,
                            int threads) {
  const AttnShape s = attention_check(a);
  const bool simd = std::is_same_v<T, float> && cpu_has_avx512();
#pragma omp parallel num_threads(threads) if (s.b * s.h * s.t * s.t * s.hd > 65536)
  {
    // Per thread: probabilities, dropout mask, transposed keys (see attention_scratch).
    T* p = scratch + omp_get_thread_num() * attention_scratch(s);
    T* mask = p + s.t;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      if constexpr (std::is_same_v<T, float>) {
        if (simd) {
          attention_forward_head_avx512(out, lse, qkv, a, s, bh, p, mask);
          continue;
        }
      }
      attention_forward_head<T, false>(out, lse, qkv, a, s, bh, p, mask);
    }
  }
}

template <class T>
void attention_backward_impl(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                             const AttentionArgs& a, T* scratch, int threads) {
  const AttnShape s = attention_check(a);
  const bool simd = std::is_same_v<T, float> && cpu_has_avx512();
#pragma omp parallel num_threads(threads) if (s.b * s.h * s.t * s.t * s.hd > 65536)
  {
    T* p = scratch + omp_get_thread_num() * attention_scratch(s);
    T* mask = p + s.t;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      if constexpr (std::is_same_v<T, float>) {
        if (simd) {
          attention_backward_head_avx512(dqkv, dout, qkv, out, lse, a, s, bh, p, mask);
          continue;
        }
      }
      attention_backward_head<T, false>(dqkv, dout, qkv, out, lse, a, s, bh, p, mask);
    }
  }
}

}  // namespace

void CpuBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) {
  const DType act = require_act_dtype(qkv, "attention_forward qkv");
  require_act(out, act, "attention_forward out");
  require_act(lse, act, "attention_forward lse");
  const AttnShape s = attention_check(args);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* scratch = static_cast<T*>(workspace(
        WorkSlot::kPerThread, static_cast<size_t>(threads_ * attention_scratch(s)) * sizeof(T)));
    attention_forward_impl(out.as<T>(), lse.as<T>(), qkv.as<const T>(), args, scratch, threads_);
  });
}

void CpuBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                                    const AttentionArgs& args) {
  const DType act = require_act_dtype(qkv, "attention_backward qkv");
  require_act(dqkv, act, "attention_backward dqkv");
  require_act(dout, act, "attention_backward dout");
  require_act(out, act, "attention_backward out");
  require_act(lse, act, "attention_backward lse");
  const AttnShape s = attention_check(args);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* scratch = static_cast<T*>(workspace(
        WorkSlot::kPerThread, static_cast<size_t>(threads_ * attention_scratch(s)) * sizeof(T)));
    attention_backward_impl(dqkv.as<T>(), dout.as<const T>(), qkv.as<const T>(), out.as<const T>(),
                            lse.as<const T>(), args, scratch, threads_);
  });
}

}  // namespace ledgerlm::cpu
