// The MLP variants' activations on the GPU: ReLU squared (model.mlp = relu2) and SwiGLU's gated
// product (model.mlp = swiglu), forward and backward: the CPU's formulas (cpu_mlp_act.cpp),
// one grid-stride kernel each.
#include <cmath>

#include "model/backend/cuda/cuda_act_checks.h"
#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T>
__device__ inline T sigmoid(T g) {
  return T(1) / (T(1) + exp(-g));
}

template <class T>
__global__ void relu2_forward_kernel(T* o, const T* x, int64_t n) {
  LLM_GRID_STRIDE(i, n) {
    const T r = x[i] > T(0) ? x[i] : T(0);
    o[i] = r * r;
  }
}

template <class T>
__global__ void relu2_backward_kernel(T* d, const T* x, const T* g, int64_t n) {
  LLM_GRID_STRIDE(i, n) d[i] = g[i] * (T(2) * (x[i] > T(0) ? x[i] : T(0)));
}

template <class T>
__global__ void swiglu_forward_kernel(T* o, const T* gate, const T* up, int64_t n) {
  LLM_GRID_STRIDE(i, n) {
    const T g = gate[i];
    o[i] = g * sigmoid(g) * up[i];
  }
}

template <class T>
__global__ void swiglu_backward_kernel(T* dgate, T* dup, const T* gate, const T* up, const T* d,
                                       int64_t n) {
  LLM_GRID_STRIDE(i, n) {
    const T g = gate[i], s = sigmoid(g), dy = d[i];
    dup[i] = dy * (g * s);
    dgate[i] = dy * up[i] * (s * (T(1) + g * (T(1) - s)));  // dgate may alias dout: read first
  }
}

}  // namespace

void CudaBackend::relu2_forward(Tensor out, Tensor x, int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(x, "relu2_forward x");
  same_act(out, act, "relu2_forward out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    relu2_forward_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream_>>>(out.as<T>(), x.as<const T>(), n);
  });
  launch_check("relu2_forward");
}

void CudaBackend::relu2_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(x, "relu2_backward x");
  same_act(dx, act, "relu2_backward dx");
  same_act(dout, act, "relu2_backward dout");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    relu2_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(dx.as<T>(), x.as<const T>(),
                                                                      dout.as<const T>(), n);
  });
  launch_check("relu2_backward");
}

void CudaBackend::swiglu_forward(Tensor out, Tensor gate, Tensor up, int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(gate, "swiglu_forward gate");
  same_act(up, act, "swiglu_forward up");
  same_act(out, act, "swiglu_forward out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    swiglu_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        out.as<T>(), gate.as<const T>(), up.as<const T>(), n);
  });
  launch_check("swiglu_forward");
}

void CudaBackend::swiglu_backward(Tensor dgate, Tensor dup, Tensor gate, Tensor up, Tensor dout,
                                  int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(gate, "swiglu_backward gate");
  same_act(up, act, "swiglu_backward up");
  same_act(dout, act, "swiglu_backward dout");
  same_act(dgate, act, "swiglu_backward dgate");
  same_act(dup, act, "swiglu_backward dup");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    swiglu_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        dgate.as<T>(), dup.as<T>(), gate.as<const T>(), up.as<const T>(), dout.as<const T>(), n);
  });
  launch_check("swiglu_backward");
}

}  // namespace ledgerlm::cuda
