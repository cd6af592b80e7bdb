// CUDA device discovery and bf16 cast kernels (see cuda_device.h).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "model/backend/cuda/cuda_device.h"

namespace ledgerlm {
namespace {

__global__ void f32_to_bf16_kernel(const float* in, __nv_bfloat16* out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

__global__ void bf16_to_f32_kernel(const __nv_bfloat16* in, float* out, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __bfloat162float(in[i]);
}

}  // namespace

int cuda_device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

std::string cuda_device_description(int device) {
  cudaDeviceProp prop{};
  cudaError_t err = cudaGetDeviceProperties(&prop, device);
  if (err != cudaSuccess) return std::string("no CUDA device: ") + cudaGetErrorString(err);
  char buf[640];  // the name (up to 256) and the figures: never truncated
  std::snprintf(buf, sizeof buf, "%s (sm_%d%d, %.1f GiB)", prop.name, prop.major, prop.minor,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

bool cuda_bf16_roundtrip(const float* in, float* out, int64_t n) {
  if (cuda_device_count() == 0) return false;
  float* d_in = nullptr;
  float* d_out = nullptr;
  __nv_bfloat16* d_mid = nullptr;
  bool ok = cudaMalloc(&d_in, n * sizeof(float)) == cudaSuccess &&
            cudaMalloc(&d_out, n * sizeof(float)) == cudaSuccess &&
            cudaMalloc(&d_mid, n * sizeof(__nv_bfloat16)) == cudaSuccess &&
            cudaMemcpy(d_in, in, n * sizeof(float), cudaMemcpyHostToDevice) == cudaSuccess;
  if (ok) {
    int threads = 256;
    int blocks = static_cast<int>((n + threads - 1) / threads);
    f32_to_bf16_kernel<<<blocks, threads>>>(d_in, d_mid, n);
    bf16_to_f32_kernel<<<blocks, threads>>>(d_mid, d_out, n);
    ok = cudaGetLastError() == cudaSuccess &&
         cudaMemcpy(out, d_out, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  }
  cudaFree(d_in);
  cudaFree(d_out);
  cudaFree(d_mid);
  return ok;
}

}  // namespace ledgerlm
