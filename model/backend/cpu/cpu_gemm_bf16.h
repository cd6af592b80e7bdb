// The CPU backend's native bf16 GEMM (AVX-512 BF16, selected at run time) for
// precision.matmul = bf16: both operands rounded to bf16, products exact in fp32, fp32 sums.
// See cpu_gemm_bf16.cpp for the layout and the numerics.
#pragma once

#include <cstdint>

#include "model/backend/cpu/cpu_isa.h"
#include "model/base/dtype.h"

namespace ledgerlm::cpu {

class CpuBackend;

// C[M,N] (+)= bf16(op(A)) bf16(op(B)). A is [M,K] ([K,M] if trans_a), B is [K,N] ([N,K] if
// trans_b), both row-major and dense, each fp32 (rounded to nearest even while packing) or bf16
// bits. C is fp32 [M,N]; load_c adds the product to the existing C. k > 0.
struct Bf16GemmArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  DType a_dtype = DType::kF32, b_dtype = DType::kF32;  // kF32 or kBF16
  bool trans_a = false, trans_b = false;
  float* c = nullptr;
  int64_t m = 0, n = 0, k = 0;
  bool load_c = false;
};

// True when this CPU has AVX-512F/BW/VL and AVX512_BF16 (VDPBF16PS) and the native kernel is not
// switched off by cpu_set_bf16_dot_enabled(false).
bool cpu_has_bf16_dot();
// True when a backend on path `isa` runs precision.matmul = bf16 on the native kernel: the
// avx512 path on a CPU with cpu_has_bf16_dot().
bool cpu_bf16_dot_used(CpuIsa isa);
// Tests switch the native kernel off to exercise the portable path on any CPU (process-wide).
void cpu_set_bf16_dot_enabled(bool enabled);

// Runs on `be`'s threads, packing into its kGemmA/kGemmB workspace. Requires cpu_has_bf16_dot().
void cpu_gemm_bf16(CpuBackend& be, const Bf16GemmArgs& args);

// Elements of packed workspace (uint32 bf16 pairs) the kernel uses for op(A) [M,K] and op(B)
// [K,N]: the memory planner predicts the workspace from these.
int64_t cpu_gemm_bf16_packed_a(int64_t m, int64_t k);
int64_t cpu_gemm_bf16_packed_b(int64_t n, int64_t k);

}  // namespace ledgerlm::cpu
