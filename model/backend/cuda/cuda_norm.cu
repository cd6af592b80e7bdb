// model.norm: LayerNorm or RMSNorm over the last dimension with any eps, the weight
// and the bias each optional (NormArgs, backend.h). One block per row in forward; backward as
// cuda_layernorm.cu: dx per row, the parameter gradients summed per part of the rows in shared
// memory and the parts added in order by a second kernel (deterministic, no atomics).
#include <cmath>

#include "model/backend/cuda/cuda_act_checks.h"
#include "model/backend/cuda/cuda_common.cuh"
#include "model/backend/cuda/cuda_norm_parts.cuh"

namespace ledgerlm::cuda {
namespace {

// A parameter element widened to T, or `fill` where the norm has no such tensor.
template <class T, class W>
__device__ T param_or(const W* p, int64_t i, T fill) {
  return p != nullptr ? static_cast<T>(load_value(p[i])) : fill;
}

template <class T, class W, class B>
__global__ void norm_forward_kernel(T* out, T* mean, T* rstd, const T* x, const W* weight,
                                    const B* bias, int64_t c, bool rms, T eps) {
  __shared__ T shared[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * c;
  T* orow = out + r * c;
  T m = 0;
  if (!rms) {
    T sum = 0;
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) sum += xr[i];
    m = block_sum(sum, shared) / static_cast<T>(c);
  }
  T var = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) var += (xr[i] - m) * (xr[i] - m);
  var = block_sum(var, shared);
  const T s = T(1) / sqrt(var / static_cast<T>(c) + eps);
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x)
    orow[i] = (xr[i] - m) * s * param_or(weight, i, T(1)) + param_or(bias, i, T(0));
  if (threadIdx.x == 0) {
    if (!rms) mean[r] = m;
    rstd[r] = s;
  }
}

// Part p of the rows: dx rows, and the part's dweight / dbias sums into partial[p][2c].
template <class T, class W>
__global__ void norm_backward_kernel(T* dx, T* partial, const T* dout, const T* x, const W* weight,
                                     const T* mean, const T* rstd, int64_t rows, int64_t c,
                                     int64_t parts, bool rms) {
  norm_backward_part(
      dx, partial, dout, x, [&](int64_t i) { return param_or(weight, i, T(1)); }, mean, rstd, rows,
      c, parts, rms);
}

void require_optional_float(const Tensor& t, const char* what) {
  LLM_REQUIRE(t.empty() || dtype_is_float(t.dtype), "cuda backend: ", what,
              " must be a float tensor");
}

// Runs f with the parameter's storage type (fp32 for an absent tensor, whose pointer is null).
template <class F>
void dispatch_optional(const Tensor& t, F&& f) {
  if (t.empty()) {
    f(float{});
    return;
  }
  dispatch_float(t.dtype, f);
}

}  // namespace

void CudaBackend::norm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                               Tensor bias, const NormArgs& args) {
  LLM_REQUIRE(x.data && dtype_is_act(x.dtype), "cuda backend: norm_forward x fp32/fp64");
  const DType act = x.dtype;
  same_act(out, act, "norm_forward out");
  same_act(rstd, act, "norm_forward rstd");
  if (!args.rms) same_act(mean, act, "norm_forward mean");
  require_optional_float(weight, "norm_forward weight");
  require_optional_float(bias, "norm_forward bias");
  LLM_REQUIRE(!args.rms || bias.empty(), "cuda backend: norm_forward: RMSNorm takes no bias");
  const int64_t rows = args.rows, c = args.channels;
  LLM_REQUIRE(rows >= 0 && c > 0, "cuda backend: norm sizes must be rows >= 0, C > 0");
  if (rows == 0) return;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    dispatch_optional(weight, [&](auto wtag) {
      using W = decltype(wtag);
      dispatch_optional(bias, [&](auto btag) {
        using B = decltype(btag);
        norm_forward_kernel<T, W, B><<<static_cast<unsigned>(rows), kRowThreads, 0, stream_>>>(
            out.as<T>(), args.rms ? nullptr : mean.as<T>(), rstd.as<T>(), x.as<const T>(),
            weight.as<const W>(), bias.as<const B>(), c, args.rms, static_cast<T>(args.eps));
      });
    });
  });
  launch_check("norm_forward");
}

void CudaBackend::norm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                                Tensor weight, Tensor mean, Tensor rstd, const NormArgs& args) {
  LLM_REQUIRE(x.data && dtype_is_act(x.dtype), "cuda backend: norm_backward x fp32/fp64");
  const DType act = x.dtype;
  same_act(dx, act, "norm_backward dx");
  same_act(dout, act, "norm_backward dout");
  same_act(rstd, act, "norm_backward rstd");
  if (!args.rms) same_act(mean, act, "norm_backward mean");
  require_optional_float(weight, "norm_backward weight");
  require_optional_float(dweight, "norm_backward dweight");
  require_optional_float(dbias, "norm_backward dbias");
  const int64_t rows = args.rows, c = args.channels;
  LLM_REQUIRE(rows >= 0 && c > 0, "cuda backend: norm sizes must be rows >= 0, C > 0");
  if (rows == 0) return;
  const int64_t parts = rows < 256 ? rows : 256;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* partial = static_cast<T*>(
        workspace(WorkSlot::kScratch, static_cast<size_t>(parts * 2 * c) * sizeof(T)));
    const size_t smem = static_cast<size_t>(2 * c) * sizeof(T);
    dispatch_optional(weight, [&](auto wtag) {
      using W = decltype(wtag);
      auto kernel = norm_backward_kernel<T, W>;
      if (smem > 48 * 1024)
        LLM_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
      kernel<<<static_cast<unsigned>(parts), kRowThreads, smem, stream_>>>(
          dx.as<T>(), partial, dout.as<const T>(), x.as<const T>(), weight.as<const W>(),
          args.rms ? nullptr : mean.as<const T>(), rstd.as<const T>(), rows, c, parts, args.rms);
    });
    launch_check("norm_backward");
    if (!dweight.empty())
      dispatch_float(dweight.dtype, [&](auto stag) {
        using S = decltype(stag);
        param_grad_finish_kernel<S, T>
            <<<blocks_for(c), kThreads, 0, stream_>>>(dweight.as<S>(), partial, c, parts, 0);
      });
    if (!dbias.empty())
      dispatch_float(dbias.dtype, [&](auto stag) {
        using S = decltype(stag);
        param_grad_finish_kernel<S, T>
            <<<blocks_for(c), kThreads, 0, stream_>>>(dbias.as<S>(), partial, c, parts, c);
      });
    launch_check("norm_backward params");
  });
}

}  // namespace ledgerlm::cuda
