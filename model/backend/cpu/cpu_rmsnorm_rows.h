// The RMSNorm row loops (cpu_norm.cpp has the contract), written once as plain loops that the
// compiler vectorises for whichever target includes them: cpu_norm.cpp (fp64), the portable
// kernel table (fp32 for baseline x86-64) and the ISA units (inside their kernel namespace,
// after their `#pragma GCC target`: AVX2 or AVX-512 code, with FMA contraction). `omp simd`
// reductions use a fixed lane order per target: deterministic per path.
//
// Include inside the including unit's namespace; <cmath> and <cstdint> come first.

// Rows [begin, end): out = x * rstd * w (w == nullptr: no weight); rstd written.
template <class T>
inline void rms_forward_rows(T* out, T* rstd, const T* x, const T* w, int64_t begin, int64_t end,
                             int64_t c, T eps) {
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * c;
    T* orow = out + r * c;
    T ss = 0;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < c; ++i) ss += xr[i] * xr[i];
    const T s = T(1) / std::sqrt(ss / static_cast<T>(c) + eps);
    if (w != nullptr) {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) orow[i] = xr[i] * s * w[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) orow[i] = xr[i] * s;
    }
    rstd[r] = s;
  }
}

// dx += rstd * (g*w - xhat * mean(g*w*xhat)); dw += g * xhat (dw == nullptr: not wanted).
// The mean term has no "- mean(g*w)" part: RMSNorm does not centre.
template <class T>
inline void rms_backward_rows(T* dxp, T* dw, const T* dop, const T* xp, const T* w, const T* rp,
                              int64_t begin, int64_t end, int64_t c) {
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = xp + r * c;
    const T* gr = dop + r * c;
    T* dxr = dxp + r * c;
    const T s = rp[r];
    T sum_gx = 0;
#pragma omp simd reduction(+ : sum_gx)
    for (int64_t i = 0; i < c; ++i) sum_gx += gr[i] * w[i] * (xr[i] * s);
    if (dw != nullptr) {
#pragma omp simd
      for (int64_t i = 0; i < c; ++i) dw[i] += gr[i] * (xr[i] * s);
    }
    const T mean_gx = sum_gx / static_cast<T>(c);
#pragma omp simd
    for (int64_t i = 0; i < c; ++i) dxr[i] += s * (gr[i] * w[i] - (xr[i] * s) * mean_gx);
  }
}
