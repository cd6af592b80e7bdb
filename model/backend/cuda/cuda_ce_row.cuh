// The loss half of the fused cross-entropy kernels (cuda_crossentropy.cu, and cuda_softcap.cu over
// capped logits), one block per row; the kernels differ only in the gradient they write after it.
#pragma once

#include <cmath>

#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {

// A row's max logit, its sum of exp(x - max) and its target column.
template <class T>
struct CeRow {
  T mx;
  double sum;
  int64_t target;
};

// Over the row's first `v` logits x: the max, then the sum of exp(x - max) in double (fixed
// tree), and the loss lse - x[*target] written by thread 0 to *loss. Every thread has read
// x[target] when it returns, so the caller may overwrite the row.
template <class T>
__device__ __forceinline__ CeRow<T> ce_row_loss(T* loss, const T* x, int64_t v,
                                                const int32_t* target_id) {
  __shared__ T shared_t[32];
  __shared__ double shared_d[32];
  T mx = -INFINITY;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) mx = x[j] > mx ? x[j] : mx;
  mx = block_max(mx, shared_t);
  double sum = 0.0;
  for (int64_t j = threadIdx.x; j < v; j += blockDim.x) sum += static_cast<double>(exp(x[j] - mx));
  sum = block_sum(sum, shared_d);
  const int64_t target = *target_id;
  const T target_logit = x[target];
  const double lse = static_cast<double>(mx) + log(sum);
  __syncthreads();  // everyone has read x[target] before it is overwritten
  if (threadIdx.x == 0) *loss = static_cast<T>(lse - static_cast<double>(target_logit));
  return {mx, sum, target};
}

}  // namespace ledgerlm::cuda
