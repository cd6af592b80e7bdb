// What the rest of ledgerlm may know of the CPU backend without including its internals
// (model/backend/cpu/): the figures the memory planner predicts its workspace from, the report
// `ledgerlm bench` prints and runs record, the GEMM library it picks per shape, and the OpenBLAS
// core-type fix-up main() applies before anything loads. Each answers for the kernel path the
// backend runs on (LEDGERLM_CPU_ISA or the best the CPU allows).
#pragma once

#include <cstdint>
#include <string>

namespace ledgerlm {

struct CpuBackendReport {
  std::string cpu;      // "AMD EPYC | flags avx2 fma f16c avx512f avx512_bf16"
  std::string path;     // "avx512 (best for this CPU)" or "avx2 (LEDGERLM_CPU_ISA)"
  std::string kernels;  // the path of every op, e.g. "gelu avx512 | layernorm avx512 | ..."
  std::string gemm;     // the GEMM libraries by shape
};
// For a model whose attention heads have `head_dim` channels; bf16_matmul: precision.matmul.
CpuBackendReport cpu_backend_report(int64_t head_dim, bool bf16_matmul);

// The kernel path's name ("avx512", "avx2", "portable") and whether it has AVX512_BF16.
std::string cpu_backend_path();
bool cpu_backend_bf16_path();

// precision.matmul = bf16 runs on the native bf16 dot-product kernel (else through sgemm on
// bf16-rounded fp32 copies).
bool cpu_backend_bf16_dot();
// fp32 elements of packed workspace the native bf16 kernel takes for op(A) [m,k] and op(B) [k,n].
int64_t cpu_backend_bf16_packed_a(int64_t m, int64_t k);
int64_t cpu_backend_bf16_packed_b(int64_t n, int64_t k);

// The fp32 GEMM library for C[m,n] = op(A) op(B), and the workspace bytes it takes (beta1: C
// accumulated into).
std::string cpu_backend_gemm_library(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b);
int64_t cpu_backend_gemm_workspace(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                   bool beta1);

// precision.subnormals (model/base/subnormals.h) on the calling thread and a `threads`-thread
// OpenMP team, where the CPU backend, OpenBLAS and oneDNN compute: "flush", "keep" or "mixed
// (K of N threads flush)".
std::string cpu_backend_subnormals(int threads);

// The OPENBLAS_CORETYPE to restart with when the loaded OpenBLAS core is slower than this CPU
// allows ("" when it is right).
std::string cpu_backend_blas_coretype();

}  // namespace ledgerlm
