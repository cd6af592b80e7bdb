// Helpers shared by the CUDA kernel files: launch geometry, fixed-order block and warp
// reductions, and the typed element access both backends share (model/backend/common/storage.h:
// Bf16 / Half storage types, load_value / store_value, dispatch_float / dispatch_act), whose
// element functions are LLM_HD, so device code widens and rounds exactly as the CPU does.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "model/backend/common/storage.h"
#include "model/backend/cuda/cuda_backend.h"

namespace ledgerlm::cuda {

constexpr int kThreads = 256;

// Blocks for one thread per element (grid-stride loops cover the rest).
inline unsigned blocks_for(int64_t n, int threads = kThreads) {
  const int64_t b = (n + threads - 1) / threads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > (int64_t{1} << 20) ? (int64_t{1} << 20) : b));
}

// Kernel launch error check. By default only the launch itself is checked (execution errors
// surface at the next sync, blamed on whatever synced); with LEDGERLM_CUDA_SYNC_CHECK=1 every
// launch also waits for the kernel, so an illegal address names the op that made it.
inline void launch_check(const char* what) {
  cuda_check(cudaGetLastError(), what);
  if (sync_check_enabled()) sync_check(what);
}

#define LLM_GRID_STRIDE(i, n)                                                            \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

// Fixed-order warp reductions (butterfly): every lane ends with the same value, and the order of
// the additions depends only on the lane values, so reruns are bitwise identical.
template <class T>
__device__ inline T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
template <class T>
__device__ inline T warp_max(T v) {
  for (int o = 16; o > 0; o >>= 1) {
    const T other = __shfl_xor_sync(0xffffffffu, v, o);
    v = other > v ? other : v;
  }
  return v;
}

// Block-wide sum / max in a fixed order (warps, then warp 0 over the warp results); every
// thread gets the result. `shared` holds at least 32 values. blockDim.x a multiple of 32.
template <class T>
__device__ inline T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // shared may still be read from a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  total = warp_sum(total);
  return total;
}
template <class T>
__device__ inline T block_max(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T total = lane < warps ? shared[lane] : shared[0];
  total = warp_max(total);
  return total;
}

}  // namespace ledgerlm::cuda
