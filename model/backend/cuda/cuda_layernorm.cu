// LayerNorm over the last dimension (eps 1e-5), forward and backward, one block per row.
//
// Forward: two passes per row (mean, then the centred variance) as on the CPU; mean and rstd
// saved in the activation dtype. Backward: dx += ... per row; dweight and dbias are reduced
// without atomics: the rows are cut into a fixed number of parts, each part's block walks its
// rows in order and sums into shared memory (each thread owns its channels), and a second kernel
// adds the parts in order. Deterministic; weights in any float dtype are widened on load.
#include <cmath>

#include "model/backend/common/op_constants.h"
#include "model/backend/cuda/cuda_act_checks.h"
#include "model/backend/cuda/cuda_common.cuh"
#include "model/backend/cuda/cuda_norm_parts.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T, class W, class B>
__global__ void layernorm_forward_kernel(T* out, T* mean, T* rstd, const T* x, const W* weight,
                                         const B* bias, int64_t c) {
  __shared__ T shared[32];
  const int64_t r = blockIdx.x;
  const T* xr = x + r * c;
  T* orow = out + r * c;
  T sum = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) sum += xr[i];
  sum = block_sum(sum, shared);
  const T m = sum / static_cast<T>(c);
  T var = 0;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) var += (xr[i] - m) * (xr[i] - m);
  var = block_sum(var, shared);
  const T s = T(1) / sqrt(var / static_cast<T>(c) + static_cast<T>(kLayerNormEps));
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    orow[i] = (xr[i] - m) * s * static_cast<T>(load_value(weight[i])) +
              static_cast<T>(load_value(bias[i]));
  }
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

// Part p of the rows: dx rows, and the part's dweight / dbias sums into partial[p][2c].
template <class T, class W>
__global__ void layernorm_backward_kernel(T* dx, T* partial, const T* dout, const T* x,
                                          const W* weight, const T* mean, const T* rstd,
                                          int64_t rows, int64_t c, int64_t parts) {
  norm_backward_part(
      dx, partial, dout, x, [&](int64_t i) { return static_cast<T>(load_value(weight[i])); }, mean,
      rstd, rows, c, parts, false);
}

}  // namespace

void CudaBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                                    Tensor bias, int64_t rows, int64_t channels) {
  LLM_REQUIRE(x.data && dtype_is_act(x.dtype), "cuda backend: layernorm_forward x fp32/fp64");
  const DType act = x.dtype;
  same_act(out, act, "layernorm_forward out");
  same_act(mean, act, "layernorm_forward mean");
  same_act(rstd, act, "layernorm_forward rstd");
  LLM_REQUIRE(
      weight.data && bias.data && dtype_is_float(weight.dtype) && dtype_is_float(bias.dtype),
      "cuda backend: layernorm_forward weight and bias must be float tensors");
  LLM_REQUIRE(rows >= 0 && channels > 0, "cuda backend: layernorm sizes must be rows >= 0, C > 0");
  if (rows == 0) return;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    dispatch_float(weight.dtype, [&](auto wtag) {
      using W = decltype(wtag);
      dispatch_float(bias.dtype, [&](auto btag) {
        using B = decltype(btag);
        layernorm_forward_kernel<T, W, B><<<static_cast<unsigned>(rows), kRowThreads, 0, stream_>>>(
            out.as<T>(), mean.as<T>(), rstd.as<T>(), x.as<const T>(), weight.as<const W>(),
            bias.as<const B>(), channels);
      });
    });
  });
  launch_check("layernorm_forward");
}

void CudaBackend::layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                                     Tensor weight, Tensor mean, Tensor rstd, int64_t rows,
                                     int64_t channels) {
  LLM_REQUIRE(x.data && dtype_is_act(x.dtype), "cuda backend: layernorm_backward x fp32/fp64");
  const DType act = x.dtype;
  same_act(dx, act, "layernorm_backward dx");
  same_act(dout, act, "layernorm_backward dout");
  same_act(mean, act, "layernorm_backward mean");
  same_act(rstd, act, "layernorm_backward rstd");
  LLM_REQUIRE(weight.data && dweight.data && dbias.data && dtype_is_float(weight.dtype) &&
                  dtype_is_float(dweight.dtype) && dtype_is_float(dbias.dtype),
              "cuda backend: layernorm_backward weight, dweight, dbias must be float tensors");
  LLM_REQUIRE(rows >= 0 && channels > 0, "cuda backend: layernorm sizes must be rows >= 0, C > 0");
  if (rows == 0) return;
  const int64_t parts = rows < 256 ? rows : 256;
  const int64_t c = channels;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* partial = static_cast<T*>(
        workspace(WorkSlot::kScratch, static_cast<size_t>(parts * 2 * c) * sizeof(T)));
    const size_t smem = static_cast<size_t>(2 * c) * sizeof(T);
    dispatch_float(weight.dtype, [&](auto wtag) {
      using W = decltype(wtag);
      auto kernel = layernorm_backward_kernel<T, W>;
      if (smem > 48 * 1024)
        LLM_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      static_cast<int>(smem)));
      kernel<<<static_cast<unsigned>(parts), kRowThreads, smem, stream_>>>(
          dx.as<T>(), partial, dout.as<const T>(), x.as<const T>(), weight.as<const W>(),
          mean.as<const T>(), rstd.as<const T>(), rows, c, parts);
    });
    launch_check("layernorm_backward");
    dispatch_float(dweight.dtype, [&](auto stag) {
      using S = decltype(stag);
      param_grad_finish_kernel<S, T>
          <<<blocks_for(c), kThreads, 0, stream_>>>(dweight.as<S>(), partial, c, parts, 0);
    });
    dispatch_float(dbias.dtype, [&](auto stag) {
      using S = decltype(stag);
      param_grad_finish_kernel<S, T>
          <<<blocks_for(c), kThreads, 0, stream_>>>(dbias.as<S>(), partial, c, parts, c);
    });
    launch_check("layernorm_backward params");
  });
}

}  // namespace ledgerlm::cuda
