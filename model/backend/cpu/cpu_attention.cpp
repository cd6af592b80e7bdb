// Causal multi-head self-attention on the fused qkv projection, flash-style.
//
// Layout: qkv [B, T, 3C] with q at columns [0, C), k at [C, 2C), v at [2C, 3C); head h uses
// columns h*hd .. (h+1)*hd of each, hd = C / H. out [B, T, C]. Scores are scaled by 1/sqrt(hd).
// Grouped-query attention (args.kv_heads = KV < H): rows are [q: C | k: KV*hd | v: KV*hd] and
// query head h reads kv head h / (H / KV); backward runs a kv head's query heads in order in one
// task, the first clearing its dk and dv, so their sum has a fixed order.
//
// Kept for backward: ONLY `out` [B, T, C] and `lse` [B, H, T] (the log-sum-exp of each row of
// scaled scores over keys j <= i, of the softmax BEFORE dropout), both in the activation dtype.
// The T x T probabilities are never stored: backward recomputes p_ij = exp(s_ij - lse_i).
//
// Dropout (args.dropout = p > 0) multiplies p_ij by m_ij = keep_ij / (1 - p) after the softmax.
// keep_ij is a pure function of (seed, site, sequence, index) with sequence = first_sequence + b
// (its place in the global batch) and index = (h*T + i)*T + j (dropout_bits), so backward
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
// The per-head code (cpu_attention_head.h) is written once over its block products. The fp32
// avx2 and avx512 paths (head_dim a multiple of the vector width) run them on register-tiled
// vector kernels (the kernel table, cpu_kernels.h) instead of BLAS: at these sizes (32 x T x hd)
// BLAS spends much of each call packing. fp64 (gradient checks) and the portable path use BLAS.
#include "model/backend/cpu/cpu_attention.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "model/backend/common/random_keys.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"

namespace ledgerlm::cpu {
namespace {

AttnShape attention_check(const AttentionArgs& a) {
  LLM_REQUIRE(a.batch >= 0 && a.seq >= 0 && a.channels > 0 && a.heads > 0,
              "cpu backend: attention needs batch, seq >= 0 and channels, heads > 0");
  LLM_REQUIRE(a.channels % a.heads == 0, "cpu backend: attention channels (", a.channels,
              ") must be divisible by heads (", a.heads, ")");
  LLM_REQUIRE(a.dropout >= 0.0 && a.dropout < 1.0,
              "cpu backend: attention dropout must be in [0, 1), got ", a.dropout);
  LLM_REQUIRE(a.impl == AttentionImpl::kOwn,
              "cpu backend: precision.attention = cudnn needs the cuda backend (cuDNN runs on a "
              "GPU); the cpu backend runs its own attention");
  LLM_REQUIRE(a.kv_heads >= 0 && a.kv_heads <= a.heads && a.heads % a.kv() == 0,
              "cpu backend: attention kv_heads (", a.kv_heads, ") must divide heads (", a.heads,
              ")");
  LLM_REQUIRE(a.qkv_width() < (int64_t{1} << 31) && a.seq < (int64_t{1} << 31),
              "cpu backend: attention sizes must fit in int32 for BLAS");
  return {a.batch, a.seq, a.channels, a.heads, a.channels / a.heads, a.kv()};
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

// The block products as BLAS calls on the strided qkv rows in place (no copies).
template <class T>
struct BlasProducts {
  const T *q, *k, *v;
  int64_t row, hd;
  BlasProducts(const T* q_, const T* k_, const T* v_, int64_t row_, const AttnShape& s, T*)
      : q(q_), k(k_), v(v_), row(row_), hd(s.hd) {}
  void prepare_forward() {}
  void prepare_backward() {}
  void qk(int64_t i0, int64_t rows, int64_t keys, T scale, T* s, int64_t lds) {
    small_gemm(false, true, rows, keys, hd, scale, q + i0 * row, row, k, row, T(0), s, lds);
  }
  void pv(const T* s, int64_t lds, int64_t rows, int64_t keys, T* o, int64_t ldo) {
    small_gemm(false, false, rows, hd, keys, T(1), s, lds, v, row, T(0), o, ldo);
  }
  void gv(const T* g, int64_t ldg, int64_t rows, int64_t keys, T* s, int64_t lds) {
    small_gemm(false, true, rows, keys, hd, T(1), g, ldg, v, row, T(0), s, lds);
  }
  void dv_add(const T* s, int64_t lds, int64_t rows, int64_t keys, const T* g, int64_t ldg, T* dv,
              int64_t ld) {
    small_gemm(true, false, keys, hd, rows, T(1), s, lds, g, ldg, T(1), dv, ld);
  }
  void dq(const T* s, int64_t lds, int64_t rows, int64_t keys, T* dq, int64_t ld) {
    small_gemm(false, false, rows, hd, keys, T(1), s, lds, k, row, T(0), dq, ld);
  }
  void dk_add(const T* s, int64_t lds, int64_t rows, int64_t keys, int64_t i0, T* dk, int64_t ld) {
    small_gemm(true, false, keys, hd, rows, T(1), s, lds, q + i0 * row, row, T(1), dk, ld);
  }
  void exp_row(T* x, int64_t n, T mul, T sub) {
    for (int64_t j = 0; j < n; ++j) x[j] = std::exp(x[j] * mul - sub);
  }
};

#include "model/backend/cpu/cpu_attention_head.h"

// The parallel region is entered even for small problems so that BLAS inside it always runs on
// one thread (the result then does not depend on the thread count). fp32 goes through the
// kernel table (vector products, or the BLAS instantiation below on the portable path).
template <class T>
void attention_forward_impl(T* out, T* lse, const T* qkv, const AttentionArgs& a, T* scratch,
                            int threads, const CpuKernels& kern) {
  const AttnShape s = attention_check(a);
#pragma omp parallel num_threads(threads)
  {
    T* sc = scratch + omp_get_thread_num() * attention_scratch(s);
#pragma omp for schedule(static)
    for (int64_t bh = 0; bh < s.b * s.h; ++bh) {
      if constexpr (std::is_same_v<T, float>) {
        kern.attention_forward_head({out, lse, qkv, &a, s}, bh, sc);
      } else {
        attn_forward_head<T, BlasProducts<T>>(out, lse, qkv, a, s, bh, sc);
      }
    }
  }
}

template <class T>
void attention_backward_impl(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                             const AttentionArgs& a, T* scratch, int threads,
                             const CpuKernels& kern) {
  const AttnShape s = attention_check(a);
#pragma omp parallel num_threads(threads)
  {
    T* sc = scratch + omp_get_thread_num() * attention_scratch(s);
    // One task per (batch, kv head): the query heads sharing a kv head add into its dk and dv,
    // in head order inside one task (no race, a fixed order). Without grouping, one head a task.
    const int64_t group = s.h / s.kv;
#pragma omp for schedule(static)
    for (int64_t bg = 0; bg < s.b * s.kv; ++bg) {
      for (int64_t bh = bg * group; bh < (bg + 1) * group; ++bh) {
        if constexpr (std::is_same_v<T, float>) {
          kern.attention_backward_head({dqkv, dout, qkv, out, lse, &a, s}, bh, sc);
        } else {
          attn_backward_head<T, BlasProducts<T>>(dqkv, dout, qkv, out, lse, a, s, bh, sc);
        }
      }
    }
  }
}

}  // namespace

void attention_forward_head_blas(const AttnForwardHead& a, int64_t bh, float* scratch) {
  attn_forward_head<float, BlasProducts<float>>(a.out, a.lse, a.qkv, *a.args, a.shape, bh, scratch);
}
void attention_backward_head_blas(const AttnBackwardHead& a, int64_t bh, float* scratch) {
  attn_backward_head<float, BlasProducts<float>>(a.dqkv, a.dout, a.qkv, a.out, a.lse, *a.args,
                                                 a.shape, bh, scratch);
}

void CpuBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) {
  const DType act = require_act_dtype(qkv, "attention_forward qkv");
  require_act(out, act, "attention_forward out");
  require_act(lse, act, "attention_forward lse");
  const AttnShape s = attention_check(args);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* scratch = static_cast<T*>(workspace(
        WorkSlot::kPerThread, static_cast<size_t>(threads_ * attention_scratch(s)) * sizeof(T)));
    attention_forward_impl(out.as<T>(), lse.as<T>(), qkv.as<const T>(), args, scratch, threads_,
                           *kernels_);
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
                            lse.as<const T>(), args, scratch, threads_, *kernels_);
  });
}

}  // namespace ledgerlm::cpu
