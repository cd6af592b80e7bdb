// The CPU backend's fp32 inner kernels, one table per path (cpu_isa.h): the ops in cpu_*.cpp
// validate, split the work into fixed chunks and call these on each chunk. The avx512 and avx2
// tables come from one source written against a vector type (cpu_kernels_body.h and friends,
// compiled per ISA in cpu_kernels_avx512.cpp / cpu_kernels_avx2.cpp); the portable table holds
// the plain loops (cpu_kernels_portable.cpp), which are also the reference the tests compare the
// others against. fp64 (gradient checks) never goes through the table.
#pragma once

#include <cstdint>
#include <string>

#include "model/backend/cpu/cpu_isa.h"

namespace ledgerlm::cpu {

// One (batch, head) pair's attention arguments (cpu_attention.h, which the attention op and the
// tables' sources include; declared here so that the table does not depend on the attention op).
struct AttnForwardHead;
struct AttnBackwardHead;

// Rows [begin, end) of a layernorm over C channels (cpu_layernorm.cpp has the contract).
struct LayerNormRows {
  int64_t begin = 0, end = 0, c = 0;
  const float* x = nullptr;      // [rows, C] (forward without add_a: the input)
  const float* add_a = nullptr;  // forward, fused residual: x = add_a + add_b written to sum
  const float* add_b = nullptr;
  float* sum = nullptr;         // [rows, C]
  const float* w = nullptr;     // [C] (fp32)
  const float* b = nullptr;     // [C] (fp32; forward only)
  float* out = nullptr;         // forward: [rows, C]
  float* mean = nullptr;        // forward writes, backward reads: [rows]
  float* rstd = nullptr;        // forward writes, backward reads: [rows]
  const float* dout = nullptr;  // backward: [rows, C]
  float* dx = nullptr;          // backward: [rows, C], accumulated (+=)
  float* dw = nullptr;          // backward: [C] partial sums over these rows, accumulated
  float* db = nullptr;          // backward: [C] partial sums over these rows, accumulated
};

struct CpuKernels {
  CpuIsa isa;
  int lanes;  // fp32 lanes per vector register (1 for portable)

  // GELU (tanh approximation): out[i] = gelu(x[i]); dx[i] = dout[i] * gelu'(x[i]). Outputs may
  // alias inputs.
  void (*gelu_forward)(float* out, const float* x, int64_t n);
  void (*gelu_backward)(float* dx, const float* x, const float* dout, int64_t n);

  // Softmax rows: max of x[0, n) (n >= 1); sum of exp(x[j] - mx) accumulated in double (x
  // overwritten by exp(x[j] - mx) when `keep`); x[j] *= s.
  float (*row_max)(const float* x, int64_t n);
  double (*exp_sum_row)(float* x, int64_t n, float mx, bool keep);
  void (*scale_row)(float* x, int64_t n, float s);

  // 16-bit casts, round to nearest even (bitwise the scalar conversions of model/base/dtype.h
  // for every non-NaN value).
  void (*bf16_to_f32)(float* dst, const uint16_t* src, int64_t n);
  void (*f32_to_bf16)(uint16_t* dst, const float* src, int64_t n);
  void (*f16_to_f32)(float* dst, const uint16_t* src, int64_t n);
  void (*f32_to_f16)(uint16_t* dst, const float* src, int64_t n);

  void (*layernorm_forward)(const LayerNormRows& r);
  void (*layernorm_backward)(const LayerNormRows& r);

  // The modern block's MLP activations and norm (cpu_mlp_act.cpp, cpu_norm.cpp have the
  // contracts). SwiGLU: out = silu(gate) * up; backward writes dgate and dup (either may alias
  // dout). ReLU squared: out = max(x, 0)^2; dx = dout * 2 max(x, 0) (dx may alias dout).
  void (*swiglu_forward)(float* out, const float* gate, const float* up, int64_t n);
  void (*swiglu_backward)(float* dgate, float* dup, const float* gate, const float* up,
                          const float* dout, int64_t n);
  void (*relu2_forward)(float* out, const float* x, int64_t n);
  void (*relu2_backward)(float* dx, const float* x, const float* dout, int64_t n);
  // The logit soft-cap (cpu_softcap.cpp): y = cap * tanh(x * inv_cap) (y may alias x); one
  // soft-capped cross-entropy row's gradient in place, y[j] = (exp(y[j] - mx) * scaled_inv -
  // [j == target] gs) * (1 - (y[j] * inv_cap)^2) over the capped logits y.
  void (*softcap_forward)(float* y, const float* x, int64_t n, float cap, float inv_cap);
  void (*softcap_grad_row)(float* y, int64_t n, float mx, float scaled_inv, float inv_cap,
                           int64_t target, float gs);
  // RMSNorm rows [begin, end) of C channels: out = x * rstd * w (w null: no weight), rstd
  // written; backward dx += ..., dw += (dw null: not wanted), w never null (ones when none).
  void (*rmsnorm_forward)(float* out, float* rstd, const float* x, const float* w, int64_t begin,
                          int64_t end, int64_t c, float eps);
  void (*rmsnorm_backward)(float* dx, float* dw, const float* dout, const float* x, const float* w,
                           const float* rstd, int64_t begin, int64_t end, int64_t c);

  // Attention: one (batch, head) pair (cpu_attention.cpp). attention_vector(hd) tells whether
  // the head runs on this path's vector products (else the BLAS ones); `scratch` holds
  // attention_scratch(shape) elements (cpu_attention.h).
  bool (*attention_vector)(int64_t head_dim);
  void (*attention_forward_head)(const AttnForwardHead& a, int64_t bh, float* scratch);
  void (*attention_backward_head)(const AttnBackwardHead& a, int64_t bh, float* scratch);
};

// The table of `isa` (which this CPU must support).
const CpuKernels& cpu_kernels(CpuIsa isa);

const CpuKernels& cpu_kernels_portable();
const CpuKernels& cpu_kernels_avx2();
const CpuKernels& cpu_kernels_avx512();

}  // namespace ledgerlm::cpu
