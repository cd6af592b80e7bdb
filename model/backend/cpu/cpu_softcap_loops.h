// The logit soft-cap's loops (cpu_softcap.cpp has the contract), written once: cpu_softcap.cpp
// instantiates them for fp64 and the portable kernel table for fp32 (the reference the vector
// paths are tested against); the vector form is cpu_softcap_body.h.
//
// Include inside the including unit's namespace; <cmath> and <cstdint> come first.

// y[i] = cap * tanh(x[i] * inv_cap) (y may alias x).
template <class T>
inline void softcap_forward_loop(T* y, const T* x, int64_t n, T cap, T inv_cap) {
  for (int64_t i = 0; i < n; ++i) y[i] = cap * std::tanh(x[i] * inv_cap);
}

// One soft-capped cross-entropy row's gradient in place: y[j] = (exp(y[j] - mx) * scaled_inv -
// [j == target] gs) * (1 - (y[j] * inv_cap)^2), with y the capped logits.
template <class T>
inline void softcap_grad_loop(T* y, int64_t n, T mx, T scaled_inv, T inv_cap, int64_t target,
                              T gs) {
  for (int64_t j = 0; j < n; ++j) {
    const T t = y[j] * inv_cap;  // tanh(x / cap), read before the row is overwritten
    T g = std::exp(y[j] - mx) * scaled_inv;
    if (j == target) g -= gs;
    y[j] = g * (T(1) - t * t);
  }
}
