// The portable kernel table: plain loops for baseline x86-64 (and any CPU without AVX2 + FMA +
// F16C). They are the reference the vector paths are tested against, and the fp32 arithmetic
// every fp32 result had before the vector paths existed.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/backend/common/op_constants.h"
#include "model/backend/cpu/cpu_attention.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/base/check.h"
#include "model/base/dtype.h"

namespace ledgerlm::cpu {
namespace {

#include "model/backend/cpu/cpu_layernorm_rows.h"
#include "model/backend/cpu/cpu_mlp_act_loops.h"
#include "model/backend/cpu/cpu_rmsnorm_rows.h"
#include "model/backend/cpu/cpu_softcap_loops.h"

// GELU's constants (op_constants.h) in fp32.
constexpr float kSqrt2OverPiF = static_cast<float>(kGeluSqrt2OverPi);
constexpr float kGeluCubicF = static_cast<float>(kGeluCubic);

// tanh(u) = 1 - 2 / (1 + exp(2u)): glibc's exp is several times cheaper than its tanh, and the
// form saturates correctly (exp overflow to inf gives 1, underflow to 0 gives -1). Its absolute
// error stays at the rounding level, which is what GELU's 0.5 x (1 + tanh) needs.
inline float tanh_via_exp(float u) {
  return 1.0f - 2.0f / (1.0f + std::exp(2.0f * u));
}

void p_gelu_forward(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float u = kSqrt2OverPiF * (v + kGeluCubicF * v * v * v);
    out[i] = 0.5f * v * (1.0f + tanh_via_exp(u));
  }
}

void p_gelu_backward(float* dx, const float* x, const float* dout, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float th = tanh_via_exp(kSqrt2OverPiF * (v + kGeluCubicF * v * v * v));
    const float du = kSqrt2OverPiF * (1.0f + 3.0f * kGeluCubicF * v * v);
    const float grad = 0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * du;
    dx[i] = dout[i] * grad;  // written, not accumulated (dx may alias dout)
  }
}

float p_row_max(const float* x, int64_t n) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, x[j]);
  return mx;
}

double p_exp_sum_row(float* x, int64_t n, float mx, bool keep) {
  double sum = 0.0;
  if (keep) {
    for (int64_t j = 0; j < n; ++j) {
      x[j] = std::exp(x[j] - mx);
      sum += static_cast<double>(x[j]);
    }
  } else {
    for (int64_t j = 0; j < n; ++j) sum += static_cast<double>(std::exp(x[j] - mx));
  }
  return sum;
}

void p_scale_row(float* x, int64_t n, float s) {
  for (int64_t j = 0; j < n; ++j) x[j] *= s;
}

void p_bf16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}
void p_f32_to_bf16(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}
void p_f16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}
void p_f32_to_f16(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

void p_layernorm_forward(const LayerNormRows& r) {
  ln_forward_rows<float>(r.out, r.mean, r.rstd, r.add_a ? r.sum : const_cast<float*>(r.x), r.add_a,
                         r.add_b, r.w, r.b, r.begin, r.end, r.c, static_cast<float>(kLayerNormEps));
}
void p_layernorm_backward(const LayerNormRows& r) {
  ln_backward_rows<float>(r.dx, r.dw, r.db, r.dout, r.x, r.w, r.mean, r.rstd, r.begin, r.end, r.c);
}

bool p_attention_vector(int64_t) {
  return false;
}

const CpuKernels kTable = {CpuIsa::kPortable,
                           1,
                           p_gelu_forward,
                           p_gelu_backward,
                           p_row_max,
                           p_exp_sum_row,
                           p_scale_row,
                           p_bf16_to_f32,
                           p_f32_to_bf16,
                           p_f16_to_f32,
                           p_f32_to_f16,
                           p_layernorm_forward,
                           p_layernorm_backward,
                           swiglu_forward_loop<float>,
                           swiglu_backward_loop<float>,
                           relu2_forward_loop<float>,
                           relu2_backward_loop<float>,
                           softcap_forward_loop<float>,
                           softcap_grad_loop<float>,
                           rms_forward_rows<float>,
                           rms_backward_rows<float>,
                           p_attention_vector,
                           attention_forward_head_blas,
                           attention_backward_head_blas};

}  // namespace

const CpuKernels& cpu_kernels_portable() {
  return kTable;
}

const CpuKernels& cpu_kernels(CpuIsa isa) {
  LLM_REQUIRE(cpu_isa_supported(isa), "cpu backend: this CPU cannot run the ", cpu_isa_name(isa),
              " path (flags: ", cpu_isa_flags(), ")");
  switch (isa) {
    case CpuIsa::kAvx512:
      return cpu_kernels_avx512();
    case CpuIsa::kAvx2:
      return cpu_kernels_avx2();
    case CpuIsa::kPortable:
      break;
  }
  return kTable;
}

}  // namespace ledgerlm::cpu
