// The logit soft-cap as vector kernels, written once against `Vec` with vexp
// (cpu_kernels_body.h, which comes first): the same operations per lane at both vector widths.
// tanh(u) = 1 - 2 / (1 + exp(2u)) as GELU's (saturating exactly; absolute error at the rounding
// level, ~6e-8, which a logit of cap * tanh carries as ~cap x 6e-8).

LLM_INLINE Vec softcap_value(Vec v, Vec c, Vec inv) {
  const Vec one = Vec::set1(1.0f);
  const Vec u = v * inv;
  return c * (one - Vec::set1(2.0f) / (one + vexp(u + u)));
}

void k_softcap_forward(float* y, const float* x, int64_t n, float cap, float inv_cap) {
  constexpr int W = Vec::kLanes;
  const Vec c = Vec::set1(cap), inv = Vec::set1(inv_cap);
  int64_t i = 0;
  for (; i + W <= n; i += W) softcap_value(Vec::load(x + i), c, inv).store(y + i);
  if (i < n) softcap_value(Vec::load_part(x + i, n - i), c, inv).store_part(y + i, n - i);
}

// y[j] = (exp(y[j] - mx) * scaled_inv - [j == target] gs) * (1 - (y[j] * inv_cap)^2).
void k_softcap_grad_row(float* y, int64_t n, float mx, float scaled_inv, float inv_cap,
                        int64_t target, float gs) {
  constexpr int W = Vec::kLanes;
  const Vec vmx = Vec::set1(mx), vs = Vec::set1(scaled_inv), inv = Vec::set1(inv_cap),
            one = Vec::set1(1.0f);
  for (int64_t i = 0; i < n; i += W) {
    const int64_t r = n - i < W ? n - i : W;
    const Vec v = Vec::load_part(y + i, r);
    const Vec t = v * inv;
    Vec g = vexp(v - vmx) * vs;
    if (target >= i && target < i + r) {
      float adj[W] = {};
      adj[target - i] = gs;
      g = g - Vec::load(adj);
    }
    (g * (one - t * t)).store_part(y + i, r);
  }
}
