// GEMM with a fused bias, and the bias gradient: fp32 on oneDNN or OpenBLAS as cpu_gemm_lib.h
// chooses by path and shape, fp64 on OpenBLAS (cblas_dgemm).
//
// The compute dtype is fp64 when any of A, B, C is fp64 and fp32 otherwise. Operands stored in
// another dtype (bf16/fp16 weights, bf16 gradients) are widened into persistent workspace
// buffers first, and a C in a 16-bit dtype is computed in fp32 and rounded to nearest even on
// store (with accumulate, the old C is widened, added to by BLAS with beta = 1, and rounded once).
//
// precision.matmul = bf16 (GemmArgs::bf16_inputs) rounds A and B to bf16 first. On CPUs with
// AVX512_BF16 the product runs on VDPBF16PS (cpu_gemm_bf16.cpp); elsewhere the rounded operands
// go through sgemm: the same rounding, a different summation order. Whether that is faster than
// fp32 depends on the CPU: VDPBF16PS does twice the FLOPs of an FMA per instruction, but where
// it issues at a quarter of the FMA rate (measured by tests/bench/bench_dot_rate.cpp on the Xeon
// this was tuned on) it is half as fast, so matmul = fp32 stays the default.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_gemm_bf16.h"
#include "model/backend/cpu/cpu_gemm_lib.h"
#include "model/backend/cpu/cpu_onednn.h"

#if LEDGERLM_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace ledgerlm::cpu {
namespace {

// Both GEMM libraries run on the same OpenMP runtime (libgomp) as the rest of the backend.
// OpenBLAS's thread count is process-wide, and oneDNN reads omp_get_max_threads() per call: both
// are set to the calling backend's count before each GEMM, so several backends with different
// thread counts in one process (tests) each get their own.
void set_threads(int threads) {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

// Row-major dense C[m,n] = op(A) op(B) + beta C (beta 0 or 1) in fp32 on `lib`, on the backend's
// threads (and, for oneDNN's matmul, its primitives, with their scratchpad in the backend's
// tracked workspace).
void sgemm(CpuBackend& be, GemmLib lib, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
           const float* a, const float* b, float beta, float* c) {
  const int threads = be.num_threads();
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;
#if LEDGERLM_HAVE_DNNL
  if (lib == GemmLib::kOneDnn) {
    OneDnnMatmuls& mm = be.onednn();
    const bool beta1 = beta != 0.0f;
    const int64_t bytes = mm.scratchpad_bytes(trans_a, trans_b, m, n, k, beta1);
    void* scratch =
        bytes > 0 ? be.workspace(WorkSlot::kGemmLib, static_cast<size_t>(bytes)) : nullptr;
    mm.run(trans_a, trans_b, m, n, k, a, b, beta1, c, scratch, threads);
    return;
  }
  if (lib == GemmLib::kOneDnnSgemm) {
    set_threads(threads);
    const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a,
                                        lda, b, ldb, beta, c, n);
    LLM_ASSERT(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st));
    return;
  }
#else
  (void)lib;
#endif
  set_threads(threads);
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(n));
}

// Library entry point per compute type: fp32 on the library cpu_gemm_lib_choose picks for the
// path and shape, fp64 on OpenBLAS.
void blas_gemm(CpuBackend& be, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
               const float* b, float beta, float* c) {
  sgemm(be, cpu_gemm_lib_choose(be.isa(), m, n, k, ta, tb), ta, tb, m, n, k, a, b, beta, c);
}
void blas_gemm(CpuBackend&, bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a,
               const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), 1.0, a,
              static_cast<int>(ta ? m : k), b, static_cast<int>(tb ? k : n), beta, c,
              static_cast<int>(n));
}

bool bf16_or_f32(const Tensor& t) {
  return t.dtype == DType::kF32 || t.dtype == DType::kBF16;
}

constexpr DType dtype_of(float) {
  return DType::kF32;
}
constexpr DType dtype_of(double) {
  return DType::kF64;
}

}  // namespace

void CpuBackend::gemm(const GemmArgs& g) {
  require_float(g.a, "gemm a");
  require_float(g.b, "gemm b");
  require_float(g.c, "gemm c");
  if (!g.bias.empty()) require_float(g.bias, "gemm bias");
  LLM_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0, "cpu backend: gemm sizes must be >= 0, got m=", g.m,
              " n=", g.n, " k=", g.k);
  LLM_REQUIRE(g.m < (int64_t{1} << 31) && g.n < (int64_t{1} << 31) && g.k < (int64_t{1} << 31),
              "cpu backend: gemm sizes must fit in int32 for BLAS");
  if (g.m == 0 || g.n == 0) return;
  const bool use_double =
      g.a.dtype == DType::kF64 || g.b.dtype == DType::kF64 || g.c.dtype == DType::kF64;

  auto run = [&](auto tag) {
    using T = decltype(tag);
    constexpr DType ct = dtype_of(T{});
    // Operands in the compute dtype, widened into workspace where stored otherwise.
    auto widen = [&](Tensor t, int64_t count, WorkSlot slot) -> T* {
      if (t.dtype == ct) return t.as<T>();
      T* w = static_cast<T*>(workspace(slot, static_cast<size_t>(count) * sizeof(T)));
      convert(Tensor(w, ct), t, count);
      return w;
    };
    // bf16 operands for precision.matmul = bf16: a copy in the compute dtype holding the
    // bf16-rounded values (fp64 goes through fp32 first; that double rounding is below bf16's).
    auto widen_rounded = [&](Tensor t, int64_t count, WorkSlot slot) -> T* {
      T* w = static_cast<T*>(workspace(slot, static_cast<size_t>(count) * sizeof(T)));
      convert(Tensor(w, ct), t, count);
      for (int64_t i = 0; i < count; ++i)
        w[i] = static_cast<T>(bf16_to_f32(f32_to_bf16(static_cast<float>(w[i]))));
      return w;
    };
    const bool native_bf16 = g.bf16_inputs && std::is_same_v<T, float> && g.k > 0 &&
                             bf16_or_f32(g.a) && bf16_or_f32(g.b) && cpu_bf16_dot_used(isa_);
    const T* a = nullptr;
    const T* b = nullptr;
    if (!native_bf16) {
      a = g.bf16_inputs ? widen_rounded(g.a, g.m * g.k, WorkSlot::kGemmA)
                        : widen(g.a, g.m * g.k, WorkSlot::kGemmA);
      b = g.bf16_inputs ? widen_rounded(g.b, g.k * g.n, WorkSlot::kGemmB)
                        : widen(g.b, g.k * g.n, WorkSlot::kGemmB);
    }
    T* c = g.c.as<T>();
    const bool c_widened = g.c.dtype != ct;
    if (c_widened) {
      c = static_cast<T*>(workspace(WorkSlot::kGemmC, static_cast<size_t>(g.m * g.n) * sizeof(T)));
      if (g.accumulate) convert(Tensor(c, ct), g.c, g.m * g.n);
    }
    // The bias goes into C before the product (rows of C = bias, or C += bias when
    // accumulating) and BLAS then adds with beta = 1: one write pass over C instead of a
    // read-modify-write pass after the GEMM.
    const bool has_bias = !g.bias.empty();
    if (has_bias) {
      const T* bias = widen(g.bias, g.n, WorkSlot::kParams);
      const int64_t m = g.m, n = g.n;
      const bool acc = g.accumulate;
#pragma omp parallel for schedule(static) num_threads(threads_) if (m * n > 32768)
      for (int64_t r = 0; r < m; ++r) {
        T* row = c + r * n;
        if (acc) {
#pragma omp simd
          for (int64_t j = 0; j < n; ++j) row[j] += bias[j];
        } else {
          std::memcpy(row, bias, static_cast<size_t>(n) * sizeof(T));
        }
      }
    }
    const bool add_to_c = g.accumulate || has_bias;
    if (g.k == 0) {
      // BLAS may return early for k == 0 without applying beta: the product is zero.
      if (!add_to_c) zero(Tensor(c, ct), g.m * g.n);
    } else if (native_bf16) {
      if constexpr (std::is_same_v<T, float>) {
        Bf16GemmArgs n;
        n.a = g.a.data, n.b = g.b.data;
        n.a_dtype = g.a.dtype, n.b_dtype = g.b.dtype;
        n.trans_a = g.trans_a, n.trans_b = g.trans_b;
        n.c = c;
        n.m = g.m, n.n = g.n, n.k = g.k;
        n.load_c = add_to_c;
        cpu_gemm_bf16(*this, n);
      }
    } else {
      blas_gemm(*this, g.trans_a, g.trans_b, g.m, g.n, g.k, a, b, add_to_c ? T(1) : T(0), c);
    }
    if (c_widened) convert(g.c, Tensor(c, ct), g.m * g.n);
  };
  if (use_double) {
    run(double{});
  } else {
    run(float{});
  }
}

void CpuBackend::bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) {
  require_float(dbias, "bias_backward dbias");
  require_act_dtype(dout, "bias_backward dout");
  LLM_REQUIRE(m >= 0 && n >= 0, "cpu backend: bias_backward sizes must be >= 0");
  if (m == 0 || n == 0) return;
  // Rows are split into `threads_` fixed chunks; each chunk sums its rows in order into its own
  // partial row, and the partials are then added in chunk order: deterministic per thread count.
  const int64_t chunks = std::min<int64_t>(threads_, m);
  dispatch_act(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* d = dout.as<const T>();
    T* partial = static_cast<T*>(
        workspace(WorkSlot::kPartials, static_cast<size_t>(chunks * n) * sizeof(T)));
#pragma omp parallel for schedule(static) num_threads(threads_) if (m * n > 16384)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = m * c / chunks, end = m * (c + 1) / chunks;
      T* acc = partial + c * n;
      for (int64_t j = 0; j < n; ++j) acc[j] = T(0);
      for (int64_t r = begin; r < end; ++r) {
        const T* row = d + r * n;
#pragma omp simd
        for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
      }
    }
    for (int64_t c = 1; c < chunks; ++c) {
      const T* src = partial + c * n;
      for (int64_t j = 0; j < n; ++j) partial[j] += src[j];
    }
    row_accumulate(dbias, 0, n, partial);
  });
}

}  // namespace ledgerlm::cpu
