// The layernorm row loops (cpu_layernorm.cpp has the contract), written once as plain loops that
// the compiler vectorises for whichever target includes them: cpu_layernorm.cpp (fp64, and the
// portable fp32 path for baseline x86-64) and the ISA units (inside their kernel namespace,
// after their `#pragma GCC target`, so the same loops become AVX2 or AVX-512 code, with FMA
// contraction). `omp simd` reductions use a fixed lane order per target: deterministic per path.
//
// Include inside the including unit's namespace; <cmath> and <cstdint> come first.

// One row: out = (x - mean) * rstd * w + b; mean and rstd returned.
template <class T>
__attribute__((always_inline)) inline void ln_forward_row(T* orow, T* mean, T* rstd, const T* xr,
                                                          const T* w, const T* b, int64_t c,
                                                          T eps) {
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < c; ++i) sum += xr[i];
  const T m = sum / static_cast<T>(c);
  T var = 0;
#pragma omp simd reduction(+ : var)
  for (int64_t i = 0; i < c; ++i) var += (xr[i] - m) * (xr[i] - m);
  const T s = T(1) / std::sqrt(var / static_cast<T>(c) + eps);
#pragma omp simd
  for (int64_t i = 0; i < c; ++i) orow[i] = (xr[i] - m) * s * w[i] + b[i];
  *mean = m;
  *rstd = s;
}

// Rows [begin, end). With `xa` and `xb` (the fused residual add), x = xa + xb is first written
// row by row (the same IEEE sums as the add op) and normalised from there.
template <class T>
__attribute__((always_inline)) inline void ln_forward_rows(T* op, T* mp, T* rp, T* xp, const T* xa,
                                                           const T* xb, const T* w, const T* b,
                                                           int64_t begin, int64_t end, int64_t c,
                                                           T eps) {
  for (int64_t r = begin; r < end; ++r) {
    T* xr = xp + r * c;
    if (xa != nullptr) {
      const T* ar = xa + r * c;
      const T* br = xb + r * c;
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) xr[i] = ar[i] + br[i];
    }
    ln_forward_row(op + r * c, mp + r, rp + r, xr, w, b, c, eps);
  }
}

// dx += rstd * (g*w - mean(g*w) - xhat * mean(g*w*xhat)); dw += g * xhat; db += g.
template <class T>
__attribute__((always_inline)) inline void ln_backward_rows(T* dxp, T* dw, T* db, const T* dop,
                                                            const T* xp, const T* w, const T* mp,
                                                            const T* rp, int64_t begin, int64_t end,
                                                            int64_t c) {
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = xp + r * c;
    const T* gr = dop + r * c;
    T* dxr = dxp + r * c;
    const T m = mp[r], s = rp[r];
    T sum_g = 0, sum_gx = 0;
#pragma omp simd reduction(+ : sum_g, sum_gx)
    for (int64_t i = 0; i < c; ++i) {
      const T xhat = (xr[i] - m) * s;
      const T gw = gr[i] * w[i];
      sum_g += gw;
      sum_gx += gw * xhat;
      dw[i] += gr[i] * xhat;
      db[i] += gr[i];
    }
    const T mean_g = sum_g / static_cast<T>(c), mean_gx = sum_gx / static_cast<T>(c);
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) {
      const T xhat = (xr[i] - m) * s;
      dxr[i] += s * (gr[i] * w[i] - mean_g - xhat * mean_gx);
    }
  }
}
