// The MLP variants' activations: ReLU squared (model.mlp = relu2) and SwiGLU's gated product
// (model.mlp = swiglu), forward and backward, fp32 and fp64.
//
// Fixed chunks split over the threads (parallel_chunks: results independent of the thread
// count). fp32 runs the kernel table of the backend's path (cpu_kernels.h: SwiGLU on the vector
// exp, ReLU squared as loops compiled for the path), fp64 the plain loops (cpu_mlp_act_loops.h),
// which are also the portable path's fp32 kernels.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

#include "model/backend/cpu/cpu_mlp_act_loops.h"

}  // namespace

void CpuBackend::relu2_forward(Tensor out, Tensor x, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "relu2_forward x");
  require_act(out, act, "relu2_forward out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* xp = x.as<const T>();
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        kern.relu2_forward(o + begin, xp + begin, end - begin);
      else
        relu2_forward_loop<T>(o + begin, xp + begin, end - begin);
    });
  });
}

void CpuBackend::relu2_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "relu2_backward x");
  require_act(dx, act, "relu2_backward dx");
  require_act(dout, act, "relu2_backward dout");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* d = dx.as<T>();
    const T* xp = x.as<const T>();
    const T* g = dout.as<const T>();
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        kern.relu2_backward(d + begin, xp + begin, g + begin, end - begin);
      else
        relu2_backward_loop<T>(d + begin, xp + begin, g + begin, end - begin);
    });
  });
}

void CpuBackend::swiglu_forward(Tensor out, Tensor gate, Tensor up, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(gate, "swiglu_forward gate");
  require_act(up, act, "swiglu_forward up");
  require_act(out, act, "swiglu_forward out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* gp = gate.as<const T>();
    const T* up_p = up.as<const T>();
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        kern.swiglu_forward(o + begin, gp + begin, up_p + begin, end - begin);
      else
        swiglu_forward_loop<T>(o + begin, gp + begin, up_p + begin, end - begin);
    });
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
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* dg = dgate.as<T>();
    T* du = dup.as<T>();
    const T* gp = gate.as<const T>();
    const T* up_p = up.as<const T>();
    const T* d = dout.as<const T>();
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      const int64_t m = end - begin;
      if constexpr (std::is_same_v<T, float>)
        kern.swiglu_backward(dg + begin, du + begin, gp + begin, up_p + begin, d + begin, m);
      else
        swiglu_backward_loop<T>(dg + begin, du + begin, gp + begin, up_p + begin, d + begin, m);
    });
  });
}

}  // namespace ledgerlm::cpu
