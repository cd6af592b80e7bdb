// AVX-512 versions of the fp32 elementwise kernels that glibc's scalar exp keeps slow (GELU
// forward/backward, attention's exp rows), selected at run time; the portable loops in
// cpu_elementwise.cpp remain the fallback and the fp64 path.
#pragma once

#include <cstdint>

namespace ledgerlm::cpu {

// True when this CPU has AVX-512F (the kernels below may be called).
bool cpu_has_avx512();

// out[i] = gelu_tanh(x[i]) for i in [0, n); out may alias x.
void cpu_gelu_forward_avx512(float* out, const float* x, int64_t n);
// dx[i] = dout[i] * gelu_tanh'(x[i]); dx may alias dout.
void cpu_gelu_backward_avx512(float* dx, const float* x, const float* dout, int64_t n);

// x[i] = exp(x[i] * mul - sub) for i in [0, n) (attention's softmax rows).
void cpu_exp_affine_avx512(float* x, int64_t n, float mul, float sub);

}  // namespace ledgerlm::cpu
