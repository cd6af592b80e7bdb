// AVX-512 GELU (tanh approximation) and exp rows for fp32, with a vector exp.
//
// exp(v) = 2^n * e^r with n = round(v / ln 2) and r = v - n ln 2 (ln 2 split in a high and a low
// part so r is exact to fp32 rounding), |r| <= ln2/2; e^r by its degree-7 Taylor polynomial
// (truncation < 2e-9 relative, below fp32's 6e-8), and 2^n applied with VSCALEFPS, which saturates
// to inf / 0 like expf. tanh(u) = 1 - 2 / (1 + exp(2u)) as in the scalar code. The results agree
// with the scalar fp32 loops to a few ulp (tests/test_ops_simd.cpp) and are deterministic: each
// element is a pure function of its inputs.
#include "model/backend/cpu/cpu_simd.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() internally, which trips a false
// -Wmaybe-uninitialized once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#define LLM_TARGET_AVX512 __attribute__((target("avx512f")))

namespace ledgerlm::cpu {
namespace {

LLM_TARGET_AVX512 inline __m512 exp_ps(__m512 v) {
  // Beyond +-100 expf is inf / 0 anyway; clamping keeps n finite for VSCALEFPS.
  v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(-100.0f)), _mm512_set1_ps(100.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), v);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// tanh(k (v + 0.044715 v^3)) for GELU's inner argument.
LLM_TARGET_AVX512 inline __m512 gelu_tanh_ps(__m512 v) {
  const __m512 v2 = _mm512_mul_ps(v, v);
  const __m512 inner = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(0.044715f), v2), v, v);
  const __m512 u = _mm512_mul_ps(_mm512_set1_ps(0.7978845608028654f), inner);
  const __m512 e = exp_ps(_mm512_add_ps(u, u));
  const __m512 one = _mm512_set1_ps(1.0f);
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(one, e)));
}

LLM_TARGET_AVX512 void gelu_forward_impl(float* out, const float* x, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 th = gelu_tanh_ps(v);
    _mm512_mask_storeu_ps(out + i, m,
                          _mm512_mul_ps(_mm512_mul_ps(half, v), _mm512_add_ps(one, th)));
  }
}

LLM_TARGET_AVX512 void gelu_backward_impl(float* dx, const float* x, const float* dout, int64_t n) {
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  const __m512 k = _mm512_set1_ps(0.7978845608028654f);
  const __m512 cubic3 = _mm512_set1_ps(3.0f * 0.044715f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    const __m512 g = _mm512_maskz_loadu_ps(m, dout + i);
    const __m512 th = gelu_tanh_ps(v);
    // du/dv = k (1 + 3 * 0.044715 v^2); grad = 0.5 (1 + th) + 0.5 v (1 - th^2) du/dv
    const __m512 du = _mm512_mul_ps(k, _mm512_fmadd_ps(cubic3, _mm512_mul_ps(v, v), one));
    const __m512 sech2 = _mm512_fnmadd_ps(th, th, one);
    const __m512 grad = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_mul_ps(half, v), sech2), du,
                                        _mm512_mul_ps(half, _mm512_add_ps(one, th)));
    _mm512_mask_storeu_ps(dx + i, m, _mm512_mul_ps(g, grad));
  }
}

LLM_TARGET_AVX512 void exp_affine_impl(float* x, int64_t n, float mul, float sub) {
  const __m512 vm = _mm512_set1_ps(mul), vs = _mm512_set1_ps(sub);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(x + i, m, exp_ps(_mm512_fmsub_ps(v, vm, vs)));
  }
}

}  // namespace

bool cpu_has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

void cpu_gelu_forward_avx512(float* out, const float* x, int64_t n) {
  gelu_forward_impl(out, x, n);
}

void cpu_exp_affine_avx512(float* x, int64_t n, float mul, float sub) {
  exp_affine_impl(x, n, mul, sub);
}

void cpu_gelu_backward_avx512(float* dx, const float* x, const float* dout, int64_t n) {
  gelu_backward_impl(dx, x, dout, n);
}

}  // namespace ledgerlm::cpu
