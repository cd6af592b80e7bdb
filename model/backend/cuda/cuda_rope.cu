// Rotary positions and the per-head RMS norm of q and k on the GPU (model.position = rope,
// model.qk_norm): the CPU's arithmetic (cpu_rope.cpp, cpu_head_rmsnorm.cpp). Rope: one thread
// per (row, head, pair), the angle in double and rounded once. Norm: one warp per (row, head),
// the sum of squares reduced in a fixed tree order (deterministic).
#include <cmath>

#include "model/backend/cuda/cuda_act_checks.h"
#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T>
__global__ void rope_kernel(T* x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads,
                            int64_t hd, int64_t stride, double theta, double sign) {
  const int64_t half = hd / 2;
  LLM_GRID_STRIDE(idx, rows * heads * half) {
    const int64_t i = idx % half, rh = idx / half, h = rh % heads, r = rh / heads;
    const double pos = static_cast<double>(pos0 + r % seq);
    const double angle = pos * pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    const T c = static_cast<T>(cos(angle)), s = static_cast<T>(sign * sin(angle));
    T* a = x + r * stride + h * hd + i;
    T* b = a + half;
    const T ai = *a, bi = *b;
    *a = ai * c - bi * s;
    *b = bi * c + ai * s;
  }
}

template <class T>
__device__ T warp_sum(T v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per (row, head): blockDim.x = 32, blockDim.y warps per block.
template <class T>
__global__ void head_rms_forward_kernel(T* x, T* rstd, int64_t count, int64_t heads, int64_t hd,
                                        int64_t stride, T eps) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (w >= count) return;
  T* v = x + (w / heads) * stride + (w % heads) * hd;
  T ss = 0;
  for (int64_t d = threadIdx.x; d < hd; d += 32) ss += v[d] * v[d];
  ss = warp_sum(ss);
  const T s = T(1) / sqrt(ss / static_cast<T>(hd) + eps);
  for (int64_t d = threadIdx.x; d < hd; d += 32) v[d] *= s;
  if (threadIdx.x == 0) rstd[w] = s;
}

template <class T>
__global__ void head_rms_backward_kernel(T* dx, const T* y, const T* rstd, int64_t count,
                                         int64_t heads, int64_t hd, int64_t stride) {
  const int64_t w = static_cast<int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
  if (w >= count) return;
  const int64_t at = (w / heads) * stride + (w % heads) * hd;
  T* g = dx + at;
  const T* yv = y + at;
  T dot = 0;
  for (int64_t d = threadIdx.x; d < hd; d += 32) dot += g[d] * yv[d];
  dot = warp_sum(dot);
  const T s = rstd[w], m = dot / static_cast<T>(hd);
  for (int64_t d = threadIdx.x; d < hd; d += 32) g[d] = s * (g[d] - yv[d] * m);
}

constexpr int kWarpsPerBlock = 8;

void require_heads(int64_t heads, int64_t hd, int64_t stride, const char* op) {
  LLM_REQUIRE(heads > 0 && hd > 0 && stride >= heads * hd, "cuda backend: ", op,
              " needs heads, head_dim > 0 and stride >= heads x head_dim");
}

}  // namespace

void CudaBackend::rope(Tensor x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads,
                       int64_t head_dim, int64_t stride, double theta, bool inverse) {
  if (rows <= 0) return;
  const DType act = act_of(x, "rope x");
  LLM_REQUIRE(seq > 0 && pos0 >= 0 && heads > 0 && head_dim > 0 && head_dim % 2 == 0 &&
                  stride >= heads * head_dim && theta > 0.0,
              "cuda backend: rope needs seq > 0, pos0 >= 0, an even head_dim and stride >= heads "
              "x head_dim");
  const int64_t n = rows * heads * (head_dim / 2);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        x.as<T>(), rows, seq, pos0, heads, head_dim, stride, theta, inverse ? -1.0 : 1.0);
  });
  launch_check("rope");
}

void CudaBackend::head_rmsnorm_forward(Tensor x, Tensor rstd, int64_t rows, int64_t heads,
                                       int64_t head_dim, int64_t stride, double eps) {
  if (rows <= 0) return;
  const DType act = act_of(x, "head_rmsnorm_forward x");
  same_act(rstd, act, "head_rmsnorm_forward rstd");
  require_heads(heads, head_dim, stride, "head_rmsnorm_forward");
  const int64_t count = rows * heads;
  const dim3 block(32, kWarpsPerBlock);
  const unsigned grid = static_cast<unsigned>((count + kWarpsPerBlock - 1) / kWarpsPerBlock);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    head_rms_forward_kernel<T><<<grid, block, 0, stream_>>>(x.as<T>(), rstd.as<T>(), count, heads,
                                                            head_dim, stride, static_cast<T>(eps));
  });
  launch_check("head_rmsnorm_forward");
}

void CudaBackend::head_rmsnorm_backward(Tensor dx, Tensor y, Tensor rstd, int64_t rows,
                                        int64_t heads, int64_t head_dim, int64_t stride) {
  if (rows <= 0) return;
  const DType act = act_of(dx, "head_rmsnorm_backward dx");
  same_act(y, act, "head_rmsnorm_backward y");
  same_act(rstd, act, "head_rmsnorm_backward rstd");
  require_heads(heads, head_dim, stride, "head_rmsnorm_backward");
  const int64_t count = rows * heads;
  const dim3 block(32, kWarpsPerBlock);
  const unsigned grid = static_cast<unsigned>((count + kWarpsPerBlock - 1) / kWarpsPerBlock);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    head_rms_backward_kernel<T><<<grid, block, 0, stream_>>>(
        dx.as<T>(), y.as<const T>(), rstd.as<const T>(), count, heads, head_dim, stride);
  });
  launch_check("head_rmsnorm_backward");
}

}  // namespace ledgerlm::cuda
