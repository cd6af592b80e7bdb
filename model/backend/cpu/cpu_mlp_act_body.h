// SwiGLU's gated product as vector kernels, written once against `Vec` with vexp
// (cpu_kernels_body.h, which comes first): the same operations per lane at both vector widths,
// so avx2 and avx512 agree bit for bit; against the portable loops (glibc's expf) they differ by
// vexp's rounding, a few ulp. Include like cpu_kernels_body.h, after it.

// silu(g) = g * sigmoid(g), sigmoid(g) = 1 / (1 + exp(-g)); vexp's clamp keeps both limits
// exact (exp(100) is inf in fp32, giving 0; exp(-100) underflows, giving 1).
LLM_INLINE Vec vsigmoid(Vec g) {
  const Vec one = Vec::set1(1.0f);
  return one / (one + vexp(Vec::zero() - g));
}

void k_swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  for (; i + W <= n; i += W) {
    const Vec g = Vec::load(gate + i);
    ((g * vsigmoid(g)) * Vec::load(up + i)).store(out + i);
  }
  if (i < n) {
    const int64_t r = n - i;
    const Vec g = Vec::load_part(gate + i, r);
    ((g * vsigmoid(g)) * Vec::load_part(up + i, r)).store_part(out + i, r);
  }
}

// du = dy g s; dg = dy up s (1 + g (1 - s)). Every input is loaded before an output is stored:
// dgate and dup may alias dout.
LLM_INLINE void swiglu_grad(Vec g, Vec u, Vec dy, Vec* dg, Vec* du) {
  const Vec one = Vec::set1(1.0f);
  const Vec s = vsigmoid(g);
  *du = dy * (g * s);
  *dg = (dy * u) * (s * (one + g * (one - s)));
}

void k_swiglu_backward(float* dgate, float* dup, const float* gate, const float* up,
                       const float* dout, int64_t n) {
  constexpr int W = Vec::kLanes;
  int64_t i = 0;
  Vec dg, du;
  for (; i + W <= n; i += W) {
    swiglu_grad(Vec::load(gate + i), Vec::load(up + i), Vec::load(dout + i), &dg, &du);
    du.store(dup + i);
    dg.store(dgate + i);
  }
  if (i < n) {
    const int64_t r = n - i;
    swiglu_grad(Vec::load_part(gate + i, r), Vec::load_part(up + i, r), Vec::load_part(dout + i, r),
                &dg, &du);
    du.store_part(dup + i, r);
    dg.store_part(dgate + i, r);
  }
}
