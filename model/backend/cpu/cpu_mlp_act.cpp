// The MLP variants' activations: ReLU squared (model.mlp = relu2) and SwiGLU's gated product
// (model.mlp = swiglu), forward and backward, fp32 and fp64.
//
// Like the neighbouring elementwise ops (cpu_elementwise.cpp): fixed chunks split over the
// threads (results independent of the thread count), plain loops. relu2 vectorises as written;
// SwiGLU's exp keeps it scalar, and the GEMMs around it dominate the MLP's time.
#include <algorithm>
#include <cmath>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"

namespace ledgerlm::cpu {
namespace {

constexpr int64_t kChunk = 1 << 14;

int64_t chunk_count(int64_t n) {
  return (n + kChunk - 1) / kChunk;
}

// sigmoid(g) = 1 / (1 + exp(-g)): exp(-g) overflows to inf for very negative g, giving 0, and
// underflows to 0 for large g, giving 1: both limits exact.
template <class T>
inline T sigmoid(T g) {
  return T(1) / (T(1) + std::exp(-g));
}

}  // namespace

void CpuBackend::relu2_forward(Tensor out, Tensor x, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "relu2_forward x");
  require_act(out, act, "relu2_forward out");
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* xp = x.as<const T>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        const T r = std::max(xp[i], T(0));
        o[i] = r * r;
      }
    }
  });
}

void CpuBackend::relu2_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "relu2_backward x");
  require_act(dx, act, "relu2_backward dx");
  require_act(dout, act, "relu2_backward dout");
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* d = dx.as<T>();
    const T* xp = x.as<const T>();
    const T* g = dout.as<const T>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) {
        d[i] = g[i] * (T(2) * std::max(xp[i], T(0)));  // written (dx may alias dout)
      }
    }
  });
}

void CpuBackend::swiglu_forward(Tensor out, Tensor gate, Tensor up, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(gate, "swiglu_forward gate");
  require_act(up, act, "swiglu_forward up");
  require_act(out, act, "swiglu_forward out");
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* gp = gate.as<const T>();
    const T* up_p = up.as<const T>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      for (int64_t i = begin; i < end; ++i) {
        const T g = gp[i];
        o[i] = g * sigmoid(g) * up_p[i];
      }
    }
  });
}

void CpuBackend::swiglu_backward(Tensor dgate, Tensor dup, Tensor gate, Tensor up, Tensor dout,
                                 int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(gate, "swiglu_backward gate");
  require_act(up, act, "swiglu_backward up");
  require_act(dout, act, "swiglu_backward dout");
  require_act(dgate, act, "swiglu_backward dgate");
  require_act(dup, act, "swiglu_backward dup");
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* dg = dgate.as<T>();
    T* du = dup.as<T>();
    const T* gp = gate.as<const T>();
    const T* up_p = up.as<const T>();
    const T* d = dout.as<const T>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      for (int64_t i = begin; i < end; ++i) {
        const T g = gp[i], s = sigmoid(g), dy = d[i];
        // silu'(g) = s (1 + g (1 - s)); dout is read before dgate (which may alias it) is written.
        du[i] = dy * (g * s);
        dg[i] = dy * up_p[i] * (s * (T(1) + g * (T(1) - s)));
      }
    }
  });
}

}  // namespace ledgerlm::cpu
