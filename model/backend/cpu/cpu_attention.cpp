// Causal multi-head self-attention on the fused qkv projection, flash-style.
//
// Layout: qkv [B, T, 3C] with q at columns [0, C), k at [C, 2C), v at [2C, 3C); head h uses
// columns h*hd .. (h+1)*hd of each, hd = C / H. out [B, T, C]. Scores are scaled by 1/sqrt(hd).
//
// Kept for backward: ONLY `out` [B, T, C] and `lse` [B, H, T] (the log-sum-exp of each row of
// scaled scores over keys j <= i, of the softmax BEFORE dropout), both in the activation dtype.
// The T x T probabilities are never stored: backward recomputes p_ij = exp(s_ij - lse_i) from
// q, k and lse, one row at a time in a per-thread buffer of T values.
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
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"

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

template <class T>
inline T dot(const T* x, const T* y, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

// m[j] = keep_ij / (1 - p) for j in [0, count), index = base + j.
template <class T>
void attention_fill_mask(T* m, uint64_t base, int64_t count, const AttentionArgs& a) {
  const uint64_t threshold = cpu_dropout_threshold(a.dropout);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - a.dropout));
  std::array<uint32_t, 4> words{};
  for (int64_t j = 0; j < count; ++j) {
    const uint64_t idx = base + static_cast<uint64_t>(j);
    if (j == 0 || (idx & 3) == 0) words = rng_bits(a.seed, RngStream::kDropout, a.site, idx >> 2);
    m[j] = words[idx & 3] >= threshold ? keep_scale : T(0);
  }
}

template <class T>
void attention_forward_impl(T* out, T* lse, const T* qkv, const AttentionArgs& a, T* scratch,
                            int threads) {
  const AttnShape s = attention_check(a);
  const int64_t row = 3 * s.c;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
#pragma omp parallel num_threads(threads) if (s.b * s.h * s.t * s.t * s.hd > 65536)
  {
    T* p = scratch + omp_get_thread_num() * 2 * s.t;  // probabilities, then the dropout mask
    T* mask = p + s.t;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      const int64_t b = bh / s.h, h = bh % s.h;
      const T* base = qkv + b * s.t * row + h * s.hd;
      for (int64_t i = 0; i < s.t; ++i) {
        const T* q = base + i * row;
        T mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = scale * dot(q, base + j * row + s.c, s.hd);
          mx = std::max(mx, p[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          p[j] = std::exp(p[j] - mx);
          sum += p[j];
        }
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
  }
}

template <class T>
void attention_backward_impl(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                             const AttentionArgs& a, T* scratch, int threads) {
  const AttnShape s = attention_check(a);
  const int64_t row = 3 * s.c;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
#pragma omp parallel num_threads(threads) if (s.b * s.h * s.t * s.t * s.hd > 65536)
  {
    T* mask = scratch + omp_get_thread_num() * 2 * s.t;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      const int64_t b = bh / s.h, h = bh % s.h;
      const T* base = qkv + b * s.t * row + h * s.hd;
      T* dbase = dqkv + b * s.t * row + h * s.hd;
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
        const T row_lse = lse[bh * s.t + i];
        if (drop) attention_fill_mask(mask, static_cast<uint64_t>((bh * s.t + i) * s.t), i + 1, a);
        for (int64_t j = 0; j <= i; ++j) {
          const T* k = base + j * row + s.c;
          const T* v = k + s.c;
          T* dk = dbase + j * row + s.c;
          T* dv = dk + s.c;
          const T p = std::exp(scale * dot(q, k, s.hd) - row_lse);
          const T m = drop ? mask[j] : T(1);
          const T pm = p * m;
          const T dp = m * dot(g, v, s.hd);
          const T ds = p * (dp - big_d) * scale;
#pragma omp simd
          for (int64_t d = 0; d < s.hd; ++d) {
            dv[d] += pm * g[d];
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
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
    T* scratch = static_cast<T*>(
        workspace(WorkSlot::kPerThread, static_cast<size_t>(threads_ * 2 * s.t) * sizeof(T)));
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
    T* scratch = static_cast<T*>(
        workspace(WorkSlot::kPerThread, static_cast<size_t>(threads_ * 2 * s.t) * sizeof(T)));
    attention_backward_impl(dqkv.as<T>(), dout.as<const T>(), qkv.as<const T>(), out.as<const T>(),
                            lse.as<const T>(), args, scratch, threads_);
  });
}

}  // namespace ledgerlm::cpu
