// The MLP variants' activations as plain loops (cpu_mlp_act.cpp has the contract), written once:
// cpu_mlp_act.cpp instantiates them for fp64 and the portable kernel table for fp32 (the
// reference the vector paths are tested against); the ISA units include them for ReLU squared,
// whose loops the compiler vectorises for their target with the same bits (a max and products,
// nothing to contract). SwiGLU's vector form is cpu_mlp_act_body.h.
//
// Include inside the including unit's namespace; <algorithm>, <cmath> and <cstdint> come first.

// max(x, 0) as std::max(x, 0) defines it (x < 0 ? 0 : x: NaN and -0 pass through), written as
// a select on values: GCC left std::max's reference form as a branch per element, unvectorised.
template <class T>
inline T relu_of(T v) {
  return v < T(0) ? T(0) : v;
}

template <class T>
inline void relu2_forward_loop(T* o, const T* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const T r = relu_of(x[i]);
    o[i] = r * r;
  }
}

template <class T>
inline void relu2_backward_loop(T* d, const T* x, const T* g, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) d[i] = g[i] * (T(2) * relu_of(x[i]));  // d may alias g
}

// sigmoid(g) = 1 / (1 + exp(-g)): exp(-g) overflows to inf for very negative g, giving 0, and
// underflows to 0 for large g, giving 1: both limits exact.
template <class T>
inline T swiglu_sigmoid(T g) {
  return T(1) / (T(1) + std::exp(-g));
}

template <class T>
inline void swiglu_forward_loop(T* o, const T* gate, const T* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i];
    o[i] = g * swiglu_sigmoid(g) * up[i];
  }
}

template <class T>
inline void swiglu_backward_loop(T* dg, T* du, const T* gate, const T* up, const T* dout,
                                 int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T g = gate[i], s = swiglu_sigmoid(g), dy = dout[i];
    // silu'(g) = s (1 + g (1 - s)); dout is read before dgate (which may alias it) is written.
    du[i] = dy * (g * s);
    dg[i] = dy * up[i] * (s * (T(1) + g * (T(1) - s)));
  }
}
