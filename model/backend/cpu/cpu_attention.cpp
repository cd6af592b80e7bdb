// Causal multi-head self-attention on the fused qkv projection, flash-style.
//
// Layout: qkv [B, T, 3C] with q at columns [0, C), k at [C, 2C), v at [2C, 3C); head h uses
// columns h*hd .. (h+1)*hd of each, hd = C / H. out [B, T, C]. Scores are scaled by 1/sqrt(hd).
//
// Kept for backward: ONLY `out` [B, T, C] and `lse` [B, H, T] (the log-sum-exp of each row of
// scaled scores over keys j <= i, of the softmax BEFORE dropout), both in the activation dtype.
// The T x T probabilities are never stored: backward recomputes p_ij = exp(s_ij - lse_i).
//
// Dropout (args.dropout = p > 0) multiplies p_ij by m_ij = keep_ij / (1 - p) after the softmax.
// keep_ij is a pure function of (seed, site, sequence, index) with sequence = first_sequence + b
// (its place in the global batch) and index = (h*T + i)*T + j (cpu_dropout_bits), so backward
// reproduces the mask without storing it, and any split of the batch draws the same mask.
// Attention and the elementwise dropout() share the (seed, kDropout, site) key space: callers
// give them distinct sites.
//
// Backward, with P~ = P * M the dropped probabilities and o_i = sum_j P~_ij v_j:
//   dv_j += P~_ij dout_i,  dP_ij = m_ij (dout_i . v_j),  D_i = dout_i . o_i = sum_j p_ij dP_ij,
//   ds_ij = p_ij (dP_ij - D_i),  dq_i = scale sum_j ds_ij k_j,  dk_j += scale ds_ij q_i.
//
// Tiling: queries are taken in blocks of kQueryBlock rows; a block only sees keys [0, end of
// block), so the causal mask wastes at most one triangle per block. Each block's products
// (S = Q K^T, O = P V; in backward dP = dO V^T, dV += P^T dO, dQ = dS K, dK += dS^T Q) are small
// GEMMs called on the strided qkv rows in place (no transposed copies), and only the softmax
// rows in between are elementwise. Work is split over (b, h); BLAS runs single-threaded inside
// the parallel region (OpenBLAS's OpenMP build checks omp_in_parallel), and each (b, h) owns its
// rows of dq, dk, dv, so the summation order is fixed: deterministic for any thread count.
// Per thread the scratch is two kQueryBlock x T matrices, a row of T mask values and this head's
// keys and values transposed (hd x T each).
//
// The fp32 path on AVX-512 CPUs (head_dim a multiple of 16) runs the block products on the
// register-tiled kernels of cpu_attention_avx512.cpp instead of BLAS: at these sizes (32 x T x hd)
// BLAS spends much of each call packing. fp64 (gradient checks) and other CPUs use BLAS.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/cpu/cpu_attention_avx512.h"
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
  LLM_REQUIRE(3 * a.channels < (int64_t{1} << 31) && a.seq < (int64_t{1} << 31),
              "cpu backend: attention sizes must fit in int32 for BLAS");
  return {a.batch, a.seq, a.channels, a.heads, a.channels / a.heads};
}

#define LLM_ALWAYS_INLINE __attribute__((always_inline))
#define LLM_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))

// Query rows per block: large enough for the GEMMs to run near the machine's rate, small enough
// that the masked triangle (half a block per block) stays a small share of the work.
constexpr int64_t kQueryBlock = 32;

// Per-thread scratch elements: the score/probability block, the dP/dS block, a mask row, and
// three hd x T head copies (K^T, and V or V^T and K: train/memory_plan.cpp predicts the same
// figure, change both together).
int64_t attention_scratch(const AttnShape& s) {
  return 2 * kQueryBlock * s.t + s.t + 3 * s.hd * s.t;
}

// Row-major C[m,n] = alpha op(A) op(B) + beta C with explicit leading dimensions.
void small_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}
void small_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(lda), b, static_cast<int>(ldb), beta, c, static_cast<int>(ldc));
}

template <class T>
LLM_ALWAYS_INLINE inline T dot(const T* x, const T* y, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

// m[j] = keep_ij / (1 - p) for j in [0, count): elements base + j of batch row `b`'s sequence.
template <class T>
LLM_ALWAYS_INLINE inline void attention_fill_mask(T* m, int64_t b, uint64_t base, int64_t count,
                                                  const AttentionArgs& a) {
  const uint64_t threshold = cpu_dropout_threshold(a.dropout);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - a.dropout));
  const uint64_t sequence = a.first_sequence + static_cast<uint64_t>(b);
  std::array<uint32_t, 4> words{};
  for (int64_t j = 0; j < count; ++j) {
    const uint64_t idx = base + static_cast<uint64_t>(j);
    if (j == 0 || (idx & 3) == 0) words = cpu_dropout_words(a.seed, a.site, sequence, idx);
    m[j] = words[idx & 3] >= threshold ? keep_scale : T(0);
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

// One (batch, head) pair of the forward pass. sc is a kQueryBlock x T block (row stride T).
template <class T, bool kAvx512>
LLM_ALWAYS_INLINE inline void attention_forward_head(T* out, T* lse, const T* qkv,
                                                     const AttentionArgs& a, const AttnShape& s,
                                                     int64_t bh, T* sc, T* mask) {
  const int64_t row = 3 * s.c;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
  const int64_t b = bh / s.h, h = bh % s.h;
  const T* q = qkv + b * s.t * row + h * s.hd;
  const T* k = q + s.c;
  const T* v = q + 2 * s.c;
  T* o = out + b * s.t * s.c + h * s.hd;
  T* kt = mask + s.t;       // K^T [hd][T]
  T* vc = kt + s.hd * s.t;  // V as dense [T][hd] rows: P V streams them contiguously
  bool blocks = false;
  if constexpr (kAvx512) {
    blocks = cpu_attention_blocks_usable(s.hd);
    if (blocks) {
      cpu_attention_transpose(k, row, s.t, s.hd, kt, s.t);
      for (int64_t j = 0; j < s.t; ++j) std::copy(v + j * row, v + j * row + s.hd, vc + j * s.hd);
    }
  }
  for (int64_t i0 = 0; i0 < s.t; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, s.t - i0), keys = i0 + rows;
    if constexpr (kAvx512) {
      if (blocks)
        cpu_attention_scores(q + i0 * row, row, kt, s.t, rows, keys, s.hd, scale, sc, s.t);
    }
    if (!blocks)
      small_gemm(false, true, rows, keys, s.hd, scale, q + i0 * row, row, k, row, T(0), sc, s.t);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      T* p = sc + r * s.t;
      // Vector reductions (a fixed lane-wise order: deterministic, not left-to-right).
      T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j <= i; ++j) mx = p[j] > mx ? p[j] : mx;
      exp_row<T, kAvx512>(p, i + 1, T(1), mx);
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j <= i; ++j) sum += p[j];
      const T inv = T(1) / sum;
      if (drop) {
        attention_fill_mask(mask, bh / s.h, static_cast<uint64_t>((bh % s.h * s.t + i) * s.t),
                            i + 1, a);
        for (int64_t j = 0; j <= i; ++j) p[j] *= inv * mask[j];
      } else {
        for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
      }
      for (int64_t j = i + 1; j < keys; ++j) p[j] = T(0);  // causal mask within the block
      lse[bh * s.t + i] = mx + std::log(sum);
    }
    if constexpr (kAvx512) {
      if (blocks)
        cpu_attention_combine(sc, s.t, 1, vc, s.hd, rows, keys, s.hd, o + i0 * s.c, s.c, false);
    }
    if (!blocks)
      small_gemm(false, false, rows, s.hd, keys, T(1), sc, s.t, v, row, T(0), o + i0 * s.c, s.c);
  }
}

// One (batch, head) pair of the backward pass: it owns this head's rows of dq, dk and dv.
// sc and ds are kQueryBlock x T blocks (row stride T).
template <class T, bool kAvx512>
LLM_ALWAYS_INLINE inline void attention_backward_head(T* dqkv, const T* dout, const T* qkv,
                                                      const T* out, const T* lse,
                                                      const AttentionArgs& a, const AttnShape& s,
                                                      int64_t bh, T* sc, T* ds, T* mask) {
  const int64_t row = 3 * s.c;
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
  const int64_t b = bh / s.h, h = bh % s.h;
  const T* q = qkv + b * s.t * row + h * s.hd;
  const T* k = q + s.c;
  const T* v = q + 2 * s.c;
  T* dq = dqkv + b * s.t * row + h * s.hd;
  T* dk = dq + s.c;
  T* dv = dq + 2 * s.c;
  const T* g = dout + b * s.t * s.c + h * s.hd;
  const T* o = out + b * s.t * s.c + h * s.hd;
  T* kt = mask + s.t;       // K^T [hd][T]
  T* vt = kt + s.hd * s.t;  // V^T [hd][T]
  T* kc = vt + s.hd * s.t;  // K as dense [T][hd] rows: dS K streams them contiguously
  bool blocks = false;
  if constexpr (kAvx512) {
    blocks = cpu_attention_blocks_usable(s.hd);
    if (blocks) {
      cpu_attention_transpose(k, row, s.t, s.hd, kt, s.t);
      cpu_attention_transpose(v, row, s.t, s.hd, vt, s.t);
      for (int64_t j = 0; j < s.t; ++j) std::copy(k + j * row, k + j * row + s.hd, kc + j * s.hd);
    }
  }
  // dk and dv of this head are sums over query blocks: clear them, then accumulate.
  for (int64_t j = 0; j < s.t; ++j)
    for (int64_t d = 0; d < s.hd; ++d) dk[j * row + d] = dv[j * row + d] = T(0);
  for (int64_t i0 = 0; i0 < s.t; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, s.t - i0), keys = i0 + rows;
    // Recomputed scores and dP~ = dout . v for the whole block, then the rows elementwise.
    if constexpr (kAvx512) {
      if (blocks) {
        cpu_attention_scores(q + i0 * row, row, kt, s.t, rows, keys, s.hd, scale, sc, s.t);
        cpu_attention_scores(g + i0 * s.c, s.c, vt, s.t, rows, keys, s.hd, T(1), ds, s.t);
      }
    }
    if (!blocks) {
      small_gemm(false, true, rows, keys, s.hd, scale, q + i0 * row, row, k, row, T(0), sc, s.t);
      small_gemm(false, true, rows, keys, s.hd, T(1), g + i0 * s.c, s.c, v, row, T(0), ds, s.t);
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      T* p = sc + r * s.t;
      T* dp = ds + r * s.t;
      const T big_d = dot(g + i * s.c, o + i * s.c, s.hd);
      exp_row<T, kAvx512>(p, i + 1, T(1), lse[bh * s.t + i]);
      if (drop) {
        attention_fill_mask(mask, bh / s.h, static_cast<uint64_t>((bh % s.h * s.t + i) * s.t),
                            i + 1, a);
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) {
          dp[j] = p[j] * (mask[j] * dp[j] - big_d) * scale;
          p[j] *= mask[j];
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) dp[j] = p[j] * (dp[j] - big_d) * scale;
      }
      for (int64_t j = i + 1; j < keys; ++j) p[j] = dp[j] = T(0);  // causal mask in the block
    }
    // dV[0:keys] += P~^T dO,  dQ = dS K,  dK[0:keys] += dS^T Q.
    if constexpr (kAvx512) {
      if (blocks) {
        cpu_attention_combine(sc, 1, s.t, g + i0 * s.c, s.c, keys, rows, s.hd, dv, row, true);
        cpu_attention_combine(ds, s.t, 1, kc, s.hd, rows, keys, s.hd, dq + i0 * row, row, false);
        cpu_attention_combine(ds, 1, s.t, q + i0 * row, row, keys, rows, s.hd, dk, row, true);
      }
    }
    if (!blocks) {
      small_gemm(true, false, keys, s.hd, rows, T(1), sc, s.t, g + i0 * s.c, s.c, T(1), dv, row);
      small_gemm(false, false, rows, s.hd, keys, T(1), ds, s.t, k, row, T(0), dq + i0 * row, row);
      small_gemm(true, false, keys, s.hd, rows, T(1), ds, s.t, q + i0 * row, row, T(1), dk, row);
    }
  }
}

// The AVX-512 instantiations: the same code compiled for 512-bit vectors (the Release build
// targets baseline x86-64), chosen per call by cpu_has_avx512().
LLM_TARGET_AVX512 void attention_forward_head_avx512(float* out, float* lse, const float* qkv,
                                                     const AttentionArgs& a, const AttnShape& s,
                                                     int64_t bh, float* sc, float* mask) {
  attention_forward_head<float, true>(out, lse, qkv, a, s, bh, sc, mask);
}
LLM_TARGET_AVX512 void attention_backward_head_avx512(float* dqkv, const float* dout,
                                                      const float* qkv, const float* out,
                                                      const float* lse, const AttentionArgs& a,
                                                      const AttnShape& s, int64_t bh, float* sc,
                                                      float* ds, float* mask) {
  attention_backward_head<float, true>(dqkv, dout, qkv, out, lse, a, s, bh, sc, ds, mask);
}

// The parallel region is entered even for small problems so that BLAS inside it always runs on
// one thread (the result then does not depend on the thread count).
template <class T>
void attention_forward_impl(T* out, T* lse, const T* qkv, const AttentionArgs& a, T* scratch,
                            int threads) {
  const AttnShape s = attention_check(a);
  const bool simd = std::is_same_v<T, float> && cpu_has_avx512();
#pragma omp parallel num_threads(threads)
  {
    T* sc = scratch + omp_get_thread_num() * attention_scratch(s);
    T* mask = sc + 2 * kQueryBlock * s.t;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      if constexpr (std::is_same_v<T, float>) {
        if (simd) {
          attention_forward_head_avx512(out, lse, qkv, a, s, bh, sc, mask);
          continue;
        }
      }
      attention_forward_head<T, false>(out, lse, qkv, a, s, bh, sc, mask);
    }
  }
}

template <class T>
void attention_backward_impl(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                             const AttentionArgs& a, T* scratch, int threads) {
  const AttnShape s = attention_check(a);
  const bool simd = std::is_same_v<T, float> && cpu_has_avx512();
#pragma omp parallel num_threads(threads)
  {
    T* sc = scratch + omp_get_thread_num() * attention_scratch(s);
    T* ds = sc + kQueryBlock * s.t;
    T* mask = ds + kQueryBlock * s.t;
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      if constexpr (std::is_same_v<T, float>) {
        if (simd) {
          attention_backward_head_avx512(dqkv, dout, qkv, out, lse, a, s, bh, sc, ds, mask);
          continue;
        }
      }
      attention_backward_head<T, false>(dqkv, dout, qkv, out, lse, a, s, bh, sc, ds, mask);
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
