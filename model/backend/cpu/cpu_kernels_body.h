// The vector kernels, written once against `Vec` (cpu_vec_avx2.h or cpu_vec_avx512.h): exp and
// GELU, the softmax rows of attention and cross-entropy, and the 16-bit casts.
//
// Include only from an ISA translation unit, inside its kernel namespace, after its Vec. All
// standard and project headers are included by that unit before its `#pragma GCC target`, so
// nothing here (or any inline function it uses) is compiled for the wider target outside the
// namespace. Elementwise results are pure functions of each element's inputs and identical for
// both vector widths (the same operations per lane); reductions use a fixed lane order, so every
// result is deterministic per path.
//
// exp(v) = 2^n * e^r with n = round(v / ln 2) and r = v - n ln 2 (ln 2 split in a high and a low
// part so r is exact to fp32 rounding), |r| <= ln2/2; e^r by its degree-7 Taylor polynomial
// (truncation < 2e-9 relative, below fp32's 6e-8), and 2^n applied with one rounding, saturating
// to inf / 0 like expf. tanh(u) = 1 - 2 / (1 + exp(2u)) as in the scalar code.

#define LLM_INLINE __attribute__((always_inline)) inline

LLM_INLINE Vec vexp(Vec v) {
  // Beyond +-100 expf is inf / 0 anyway; clamping keeps n in scale_pow2's range.
  v = Vec::min(Vec::max(v, Vec::set1(-100.0f)), Vec::set1(100.0f));
  const Vec n = Vec::round_nearest(v * Vec::set1(1.44269504088896341f));
  Vec r = Vec::fnmadd(n, Vec::set1(0.693145751953125f), v);
  r = Vec::fnmadd(n, Vec::set1(1.42860682030941723212e-6f), r);
  Vec p = Vec::set1(1.0f / 5040.0f);
  p = Vec::fmadd(p, r, Vec::set1(1.0f / 720.0f));
  p = Vec::fmadd(p, r, Vec::set1(1.0f / 120.0f));
  p = Vec::fmadd(p, r, Vec::set1(1.0f / 24.0f));
  p = Vec::fmadd(p, r, Vec::set1(1.0f / 6.0f));
  p = Vec::fmadd(p, r, Vec::set1(0.5f));
  p = Vec::fmadd(p, r, Vec::set1(1.0f));
  p = Vec::fmadd(p, r, Vec::set1(1.0f));
  return Vec::scale_pow2(p, n);
}

// tanh(k (v + 0.044715 v^3)) for GELU's inner argument.
LLM_INLINE Vec gelu_tanh(Vec v) {
  const Vec v2 = v * v;
  const Vec inner = Vec::fmadd(Vec::set1(static_cast<float>(kGeluCubic)) * v2, v, v);
  const Vec u = Vec::set1(static_cast<float>(kGeluSqrt2OverPi)) * inner;
  const Vec e = vexp(u + u);
  const Vec one = Vec::set1(1.0f);
  return one - Vec::set1(2.0f) / (one + e);
}

LLM_INLINE Vec gelu_value(Vec v) {
  return (Vec::set1(0.5f) * v) * (Vec::set1(1.0f) + gelu_tanh(v));
}

// dgelu/dv: du/dv = k (1 + 3 * 0.044715 v^2); 0.5 (1 + th) + 0.5 v (1 - th^2) du/dv.
LLM_INLINE Vec gelu_grad(Vec v) {
  const Vec half = Vec::set1(0.5f), one = Vec::set1(1.0f);
  const Vec th = gelu_tanh(v);
  const Vec du = Vec::set1(static_cast<float>(kGeluSqrt2OverPi)) *
                 Vec::fmadd(Vec::set1(3.0f * static_cast<float>(kGeluCubic)), v * v, one);
  const Vec sech2 = Vec::fnmadd(th, th, one);
  return Vec::fmadd((half * v) * sech2, du, half * (one + th));
}

void k_gelu_forward(float* out, const float* x, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) gelu_value(Vec::load(x + i)).store(out + i);
  if (i < n) gelu_value(Vec::load_part(x + i, n - i)).store_part(out + i, n - i);
}

void k_gelu_backward(float* dx, const float* x, const float* dout, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(dout + i) * gelu_grad(Vec::load(x + i))).store(dx + i);
  if (i < n) {
    const int64_t r = n - i;
    (Vec::load_part(dout + i, r) * gelu_grad(Vec::load_part(x + i, r))).store_part(dx + i, r);
  }
}

// x[i] = exp(x[i] * mul - sub)
void k_exp_affine(float* x, int64_t n, float mul, float sub) {
  constexpr int W = Vec::kLanes;
  const Vec vm = Vec::set1(mul), vs = Vec::set1(sub);
  int64_t i = 0;
  for (; i + W <= n; i += W) vexp(Vec::fmsub(Vec::load(x + i), vm, vs)).store(x + i);
  if (i < n) vexp(Vec::fmsub(Vec::load_part(x + i, n - i), vm, vs)).store_part(x + i, n - i);
}

// max over x[0, n) (n >= 1): lane-wise maxima, then the fixed-order horizontal max.
float k_row_max(const float* x, int64_t n) {
  constexpr int W = Vec::kLanes;
  Vec m = Vec::set1(-INFINITY);
  int64_t i = 0;
  for (; i + W <= n; i += W) m = Vec::max(m, Vec::load(x + i));
  if (i < n) m = Vec::max(m, Vec::load_part_or(x + i, n - i, -INFINITY));
  return m.reduce_max();
}

// One softmax cross-entropy row (cpu_crossentropy.cpp has the contract): returns
// sum_j exp(x_j - mx) accumulated in double lanes (summed in a fixed order at the end); with
// `write_grad` the row keeps exp(x_j - mx) in place for the caller to scale.
double k_exp_sum_row(float* x, int64_t n, float mx, bool write_grad) {
  constexpr int W = Vec::kLanes;
  double acc[W] = {};
  const Vec vmx = Vec::set1(mx);
  int64_t i = 0;
  for (; i < n; i += W) {
    const int64_t r = n - i < W ? n - i : W;
    const Vec e = vexp(Vec::load_part(x + i, r) - vmx);
    // Lanes past the row hold exp(0 - mx): zero them before they reach the sum.
    const Vec ez = r == W ? e : e.keep_first(r);
    ez.add_to_double(acc);
    if (write_grad) ez.store_part(x + i, r);
  }
  double sum = 0.0;
  for (int j = 0; j < W; ++j) sum += acc[j];
  return sum;
}

// x[i] *= s for i in [0, n)
void k_scale_row(float* x, int64_t n, float s) {
  constexpr int W = Vec::kLanes;
  const Vec vs = Vec::set1(s);
  int64_t i = 0;
  for (; i + W <= n; i += W) (Vec::load(x + i) * vs).store(x + i);
  if (i < n) (Vec::load_part(x + i, n - i) * vs).store_part(x + i, n - i);
}

// ---- 16-bit casts (nearest even), n elements; the scalar tail uses the same definitions ----

void k_bf16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) Vec::load_bf16(src + i).store(dst + i);
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void k_f32_to_bf16(uint16_t* dst, const float* src, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) Vec::load(src + i).store_bf16(dst + i);
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void k_f16_to_f32(float* dst, const uint16_t* src, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) Vec::load_f16(src + i).store(dst + i);
  for (; i < n; ++i) dst[i] = f16_to_f32(src[i]);
}

void k_f32_to_f16(uint16_t* dst, const float* src, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) Vec::load(src + i).store_f16(dst + i);
  for (; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}
