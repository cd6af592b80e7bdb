// The CPU backend's native bf16 GEMM (AVX-512 BF16, selected at run time): fp32 activations times
// bf16 weights with fp32 accumulation. See cpu_gemm_bf16.cpp for the layout and the numerics.
#pragma once

#include <cstdint>

namespace ledgerlm::cpu {

class CpuBackend;

// C[M,N] (+)= bf16(A[M,K]) op(B) (+ bias[N]). A fp32 row-major [M,K]; B bf16 bits, [N,K] when
// trans_b else [K,N]; C fp32 [M,N]; bias fp32 or null. k > 0.
struct Bf16GemmArgs {
  const float* a = nullptr;
  const uint16_t* b = nullptr;
  float* c = nullptr;
  const float* bias = nullptr;
  int64_t m = 0, n = 0, k = 0;
  bool trans_b = false;
  bool accumulate = false;
};

// True when this CPU has AVX-512F/BW/VL and AVX512_BF16 (VDPBF16PS).
bool cpu_has_bf16_dot();

// Runs on `be`'s threads, packing into its kGemmA/kGemmB workspace. Requires cpu_has_bf16_dot().
void cpu_gemm_bf16(CpuBackend& be, const Bf16GemmArgs& args);

}  // namespace ledgerlm::cpu
