// GEMM through cuBLASLt, and the bias gradient.
//
// Row-major C[M,N] = op(A) op(B) is computed as the column-major C^T = op(B)^T op(A)^T: the
// buffers are passed as they are, B first. Compute types, as backend.h defines them:
// - fp32 operands: CUBLAS_COMPUTE_32F (exact fp32 products and sums); TF32 tensor cores
//   (CUBLAS_COMPUTE_32F_FAST_TF32) only when GemmArgs::tf32.
// - bf16_inputs, or both operands bf16 (or both fp16): 16-bit operands, fp32 accumulation.
//   bf16_inputs rounds fp32 operands to bf16 (nearest even) first, as the CPU does.
// - mixed operand dtypes (e.g. fp32 activations x bf16 weights) are widened to fp32 first.
// - fp64 (gradient checks): cublasDgemm.
// C is produced in fp32 (or fp64) and rounded to a 16-bit C dtype by the cast kernel; the bias is
// the cuBLASLt bias epilogue where the heuristic offers one, else a separate kernel.
// Algorithms are restricted to reduction schemes without output-type atomics, so a GEMM's
// result is the same on every run on the same GPU.
#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T, class B>
__global__ void add_bias_kernel(T* c, const B* bias, int64_t m, int64_t n, bool accumulate) {
  LLM_GRID_STRIDE(idx, m * n) {
    const T b = static_cast<T>(load_value(bias[idx % n]));
    c[idx] = accumulate ? c[idx] + b : b;
  }
}

// Fixed-order column sums: partial[p][j] sums rows [p*rows_per, ...) of column j in order;
// then dbias[j] += sum_p partial[p][j] in p order.
template <class T>
__global__ void bias_partials_kernel(const T* d, int64_t m, int64_t n, int64_t parts, T* partial) {
  const int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t p = blockIdx.y;
  if (j >= n) return;
  const int64_t begin = m * p / parts, end = m * (p + 1) / parts;
  T acc = 0;
  for (int64_t r = begin; r < end; ++r) acc += d[r * n + j];
  partial[p * n + j] = acc;
}

template <class S, class T>
__global__ void bias_finish_kernel(S* dbias, const T* partial, int64_t n, int64_t parts) {
  using C = typename ComputeOf<S>::type;
  LLM_GRID_STRIDE(j, n) {
    T acc = partial[j];
    for (int64_t p = 1; p < parts; ++p) acc += partial[p * n + j];
    store_value(dbias[j], static_cast<C>(load_value(dbias[j])) + static_cast<C>(acc));
  }
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kF64:
      return CUDA_R_64F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      fail(error_message("cuda backend: gemm of dtype ", dtype_name(t)));
  }
}

uint32_t alignment_of(const void* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  uint32_t align = 256;
  while (align > 1 && (a % align) != 0) align >>= 1;
  return align;
}

// RAII holders for the cuBLASLt descriptors of one call.
struct LtCall {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~LtCall() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

// D[col-major N x M] = op(B') op(A') (+ C) (+ bias[N]) with fp32 D. Returns false when no
// algorithm supports the bias epilogue (the caller then adds the bias itself).
bool lt_matmul(CudaBackend& be, const GemmArgs& g, const void* a, const void* b,
               cudaDataType_t ab_type, cublasComputeType_t compute, float* d, const float* bias,
               bool accumulate) {
  LtCall call;
  LLM_CUBLAS(cublasLtMatmulDescCreate(&call.desc, compute, CUDA_R_32F));
  // The first operand is our B, the second our A.
  const cublasOperation_t op_first = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_second = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  LLM_CUBLAS(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                            sizeof(op_first)));
  LLM_CUBLAS(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                            sizeof(op_second)));
  if (bias != nullptr) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    const cudaDataType_t bias_type = CUDA_R_32F;
    LLM_CUBLAS(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi,
                                              sizeof(epi)));
    LLM_CUBLAS(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                              sizeof(bias)));
    LLM_CUBLAS(cublasLtMatmulDescSetAttribute(call.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                              &bias_type, sizeof(bias_type)));
  }
  const uint64_t m = static_cast<uint64_t>(g.m), n = static_cast<uint64_t>(g.n),
                 k = static_cast<uint64_t>(g.k);
  // Stored shapes (column-major view of the row-major buffers).
  if (g.trans_b) {
    LLM_CUBLAS(cublasLtMatrixLayoutCreate(&call.a, ab_type, k, n, static_cast<int64_t>(k)));
  } else {
    LLM_CUBLAS(cublasLtMatrixLayoutCreate(&call.a, ab_type, n, k, static_cast<int64_t>(n)));
  }
  if (g.trans_a) {
    LLM_CUBLAS(cublasLtMatrixLayoutCreate(&call.b, ab_type, m, k, static_cast<int64_t>(m)));
  } else {
    LLM_CUBLAS(cublasLtMatrixLayoutCreate(&call.b, ab_type, k, m, static_cast<int64_t>(k)));
  }
  LLM_CUBLAS(cublasLtMatrixLayoutCreate(&call.c, CUDA_R_32F, n, m, static_cast<int64_t>(n)));

  LLM_CUBLAS(cublasLtMatmulPreferenceCreate(&call.pref));
  const size_t ws_bytes = be.cublas_workspace_bytes();
  void* ws = be.workspace(WorkSlot::kCublas, ws_bytes);
  LLM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes, sizeof(ws_bytes)));
  const uint32_t align_a = alignment_of(b), align_b = alignment_of(a), align_c = alignment_of(d);
  LLM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof(align_a)));
  LLM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof(align_b)));
  LLM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof(align_c)));
  LLM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof(align_c)));
  // Split-K partial sums may be reduced in a separate pass or in the compute type, never by
  // accumulating into the output in place.
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                           CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  LLM_CUBLAS(cublasLtMatmulPreferenceSetAttribute(
      call.pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      be.lt(), call.desc, call.a, call.b, call.c, call.c, call.pref, 1, &result, &found);
  if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
    LLM_REQUIRE(bias != nullptr, "cuda backend: cuBLASLt has no algorithm for gemm m=", g.m,
                " n=", g.n, " k=", g.k, " (status ", static_cast<int>(st), ")");
    return false;
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // A second operand pointer in cuBLASLt terms is our A: (first=b, second=a).
  LLM_CUBLAS(cublasLtMatmul(be.lt(), call.desc, &alpha, b, call.a, a, call.b, &beta, d, call.c, d,
                            call.c, &result.algo, ws, ws_bytes, be.stream()));
  if (sync_check_enabled()) sync_check("gemm (cublasLtMatmul)");
  return true;
}

}  // namespace

void CudaBackend::gemm(const GemmArgs& g) {
  LLM_REQUIRE(g.a.data && g.b.data && g.c.data && dtype_is_float(g.a.dtype) &&
                  dtype_is_float(g.b.dtype) && dtype_is_float(g.c.dtype),
              "cuda backend: gemm needs float tensors a, b, c");
  LLM_REQUIRE(g.bias.empty() || dtype_is_float(g.bias.dtype), "cuda backend: gemm bias dtype");
  LLM_REQUIRE(g.m >= 0 && g.n >= 0 && g.k >= 0,
              "cuda backend: gemm sizes must be >= 0, got m=", g.m, " n=", g.n, " k=", g.k);
  LLM_REQUIRE(g.m < (int64_t{1} << 31) && g.n < (int64_t{1} << 31) && g.k < (int64_t{1} << 31),
              "cuda backend: gemm sizes must fit in int32");
  if (g.m == 0 || g.n == 0) return;
  const bool use_double =
      g.a.dtype == DType::kF64 || g.b.dtype == DType::kF64 || g.c.dtype == DType::kF64;
  const DType ct = use_double ? DType::kF64 : DType::kF32;
  const int64_t mn = g.m * g.n;
  const bool has_bias = !g.bias.empty();

  // The result in the compute dtype: C itself, or a workspace copy (holding old C to accumulate).
  Tensor c = g.c;
  const bool c_widened = g.c.dtype != ct;
  if (c_widened) {
    c = Tensor(workspace(WorkSlot::kGemmC, static_cast<size_t>(mn) * dtype_size(ct)), ct);
    if (g.accumulate) convert(c, g.c, mn);
  }
  auto operand = [&](Tensor t, int64_t count, DType want, WorkSlot slot) -> const void* {
    if (t.dtype == want) return t.data;
    Tensor w(workspace(slot, static_cast<size_t>(count) * dtype_size(want)), want);
    convert(w, t, count);
    return w.data;
  };
  auto add_bias = [&](bool onto_c) {
    dispatch_act(ct, [&](auto tag) {
      using T = decltype(tag);
      dispatch_float(g.bias.dtype, [&](auto btag) {
        using B = decltype(btag);
        add_bias_kernel<T, B><<<blocks_for(mn), kThreads, 0, stream_>>>(
            c.as<T>(), g.bias.as<const B>(), g.m, g.n, onto_c);
      });
    });
    launch_check("gemm bias");
  };

  if (g.k == 0) {
    if (!g.accumulate) zero(c, mn);
    if (has_bias) add_bias(true);
  } else if (use_double) {
    const double* a = static_cast<const double*>(operand(g.a, g.m * g.k, ct, WorkSlot::kGemmA));
    const double* b = static_cast<const double*>(operand(g.b, g.k * g.n, ct, WorkSlot::kGemmB));
    if (has_bias) add_bias(g.accumulate);  // C = bias (or C += bias), then C += A B
    const double alpha = 1.0, beta = (g.accumulate || has_bias) ? 1.0 : 0.0;
    LLM_CUBLAS(cublasDgemm(
        blas_, g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
        static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k), &alpha, b,
        static_cast<int>(g.trans_b ? g.k : g.n), a, static_cast<int>(g.trans_a ? g.m : g.k), &beta,
        c.as<double>(), static_cast<int>(g.n)));
    if (sync_check_enabled()) sync_check("gemm (cublasDgemm)");
  } else {
    DType ab = DType::kF32;
    if (g.bf16_inputs) {
      ab = DType::kBF16;
    } else if (g.a.dtype == g.b.dtype && (g.a.dtype == DType::kBF16 || g.a.dtype == DType::kF16)) {
      ab = g.a.dtype;
    }
    const void* a = operand(g.a, g.m * g.k, ab, WorkSlot::kGemmA);
    const void* b = operand(g.b, g.k * g.n, ab, WorkSlot::kGemmB);
    const cublasComputeType_t compute =
        (ab == DType::kF32 && g.tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    const float* bias =
        has_bias ? static_cast<const float*>(operand(g.bias, g.n, DType::kF32, WorkSlot::kGemmBias))
                 : nullptr;
    if (!lt_matmul(*this, g, a, b, cuda_type(ab), compute, c.as<float>(), bias, g.accumulate)) {
      lt_matmul(*this, g, a, b, cuda_type(ab), compute, c.as<float>(), nullptr, g.accumulate);
      add_bias(true);
    }
  }
  if (c_widened) convert(g.c, c, mn);
}

void CudaBackend::bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) {
  LLM_REQUIRE(dbias.data && dtype_is_float(dbias.dtype), "cuda backend: bias_backward dbias");
  LLM_REQUIRE(dout.data && dtype_is_act(dout.dtype), "cuda backend: bias_backward dout fp32/fp64");
  LLM_REQUIRE(m >= 0 && n >= 0, "cuda backend: bias_backward sizes must be >= 0");
  if (m == 0 || n == 0) return;
  const int64_t parts = m < 64 ? m : 64;
  dispatch_act(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* partial =
        static_cast<T*>(workspace(WorkSlot::kScratch, static_cast<size_t>(parts * n) * sizeof(T)));
    const dim3 grid(static_cast<unsigned>((n + 127) / 128), static_cast<unsigned>(parts));
    bias_partials_kernel<T><<<grid, 128, 0, stream_>>>(dout.as<const T>(), m, n, parts, partial);
    launch_check("bias partials");
    dispatch_float(dbias.dtype, [&](auto stag) {
      using S = decltype(stag);
      bias_finish_kernel<S, T>
          <<<blocks_for(n), kThreads, 0, stream_>>>(dbias.as<S>(), partial, n, parts);
    });
    launch_check("bias finish");
  });
}

}  // namespace ledgerlm::cuda
