// What the LayerNorm (cuda_layernorm.cu) and model.norm (cuda_norm.cu) kernels share: the
// backward of a part of the rows with its parameter-gradient sums, and the kernel that adds the
// parts in order. Deterministic, no atomics.
#pragma once

#include <cstdint>

#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {

constexpr int kRowThreads = 256;

// The body of a backward kernel, one block per part p = blockIdx.x of the rows: dx rows +=
// s * (g * w - mean_g - xhat * mean_gx), and the part's dweight / dbias sums (in shared memory,
// each thread owning its channels, rows in order) into partial[p][2c]. weight_at(i): the weight
// of channel i widened to T. rms: RMSNorm (no centring: mean is not read, no mean(g * w) term);
// a compile-time false folds those branches away.
template <class T, class WeightAt>
__device__ __forceinline__ void norm_backward_part(T* dx, T* partial, const T* dout, const T* x,
                                                   WeightAt weight_at, const T* mean, const T* rstd,
                                                   int64_t rows, int64_t c, int64_t parts,
                                                   bool rms) {
  extern __shared__ unsigned char smem_raw[];
  T* dw = reinterpret_cast<T*>(smem_raw);
  T* db = dw + c;
  __shared__ T shared[32];
  const int64_t p = blockIdx.x;
  const int64_t begin = rows * p / parts, end = rows * (p + 1) / parts;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) dw[i] = db[i] = T(0);
  for (int64_t r = begin; r < end; ++r) {
    const T* xr = x + r * c;
    const T* gr = dout + r * c;
    T* dxr = dx + r * c;
    const T m = rms ? T(0) : mean[r], s = rstd[r];
    T sum_g = 0, sum_gx = 0;
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
      const T xhat = (xr[i] - m) * s;
      const T gw = gr[i] * weight_at(i);
      sum_g += gw;
      sum_gx += gw * xhat;
      dw[i] += gr[i] * xhat;
      db[i] += gr[i];
    }
    sum_g = block_sum(sum_g, shared);
    sum_gx = block_sum(sum_gx, shared);
    const T mean_g = rms ? T(0) : sum_g / static_cast<T>(c), mean_gx = sum_gx / static_cast<T>(c);
    for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
      const T xhat = (xr[i] - m) * s;
      dxr[i] += s * (gr[i] * weight_at(i) - mean_g - xhat * mean_gx);
    }
  }
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    partial[p * 2 * c + i] = dw[i];
    partial[p * 2 * c + c + i] = db[i];
  }
}

// dparam += the sum over the parts of partial[p][offset + i], in part order.
template <class S, class T>
__global__ void param_grad_finish_kernel(S* dparam, const T* partial, int64_t c, int64_t parts,
                                         int64_t offset) {
  using C = typename ComputeOf<S>::type;
  LLM_GRID_STRIDE(i, c) {
    T acc = partial[offset + i];
    for (int64_t p = 1; p < parts; ++p) acc += partial[p * 2 * c + offset + i];
    store_value(dparam[i], static_cast<C>(load_value(dparam[i])) + static_cast<C>(acc));
  }
}

}  // namespace ledgerlm::cuda
