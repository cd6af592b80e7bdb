// Whole-buffer reductions: sum, sum of squares (accumulated in double; also fused with the
// gradient noise scale's fold, backend.h) and the non-finite check.
//
// Fixed order, so reruns are bitwise identical: the buffer is cut into chunks of kBufferChunk
// elements (op_constants.h: the CPU backend's chunking); one block reduces a chunk with a fixed
// per-thread stride and a fixed tree, and one thread then adds the chunk partials in chunk order,
// as the CPU does. The result differs from the CPU's left-to-right chunk sums only by double
// rounding.
#include "model/backend/common/op_constants.h"
#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class S, bool kSquares>
__global__ void chunk_sums_kernel(const S* x, int64_t n, double* partial) {
  __shared__ double shared[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kBufferChunk;
  const int64_t end = begin + kBufferChunk < n ? begin + kBufferChunk : n;
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double v = static_cast<double>(load_value(x[i]));
    acc += kSquares ? v * v : v;
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

// chunk_sums_kernel<S, true> with the fold (backend.h) done by the thread that reads each
// element: the same per-thread order and tree, so the same partials as sum_squares.
template <class S, class C>
__global__ void chunk_squares_fold_kernel(S* x, S* y, int64_t n, SquaresFold fold,
                                          double* partial) {
  __shared__ double shared[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kBufferChunk;
  const int64_t end = begin + kBufferChunk < n ? begin + kBufferChunk : n;
  double acc = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const S xv = x[i];
    const double v = static_cast<double>(load_value(xv));
    acc += v * v;
    if (fold == SquaresFold::kAddFrom) {
      store_value(x[i], static_cast<C>(load_value(xv)) + static_cast<C>(load_value(y[i])));
    } else {
      if (fold == SquaresFold::kMove)
        y[i] = xv;
      else
        store_value(y[i], static_cast<C>(load_value(y[i])) + static_cast<C>(load_value(xv)));
      store_value(x[i], C(0));
    }
  }
  acc = block_sum(acc, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void ordered_total_kernel(double* partial, int64_t count) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double total = 0.0;
  for (int64_t c = 0; c < count; ++c) total += partial[c];
  partial[count] = total;
}

template <class S>
__global__ void finite_kernel(const S* x, int64_t n, int* bad) {
  using C = typename ComputeOf<S>::type;
  LLM_GRID_STRIDE(i, n) {
    // v * 0 is 0 for finite v and NaN for inf/NaN (the CPU's test).
    const C v = static_cast<C>(load_value(x[i])) * C(0);
    if (!(v == C(0))) *bad = 1;  // every writer stores the same value
  }
}

}  // namespace

namespace {
// The chunk partials in `partial` (chunks of them) added in chunk order on the device.
double ordered_total(CudaBackend& be, double* partial, int64_t chunks) {
  ordered_total_kernel<<<1, 32, 0, be.stream()>>>(partial, chunks);
  launch_check("ordered total");
  double total = 0.0;
  LLM_CUDA(cudaMemcpyAsync(&total, partial + chunks, sizeof(double), cudaMemcpyDeviceToHost,
                           be.stream()));
  be.synchronize();
  return total;
}
}  // namespace

namespace {
template <bool kSquares>
double chunked_sum(CudaBackend& be, Tensor x, int64_t n) {
  const int64_t chunks = (n + kBufferChunk - 1) / kBufferChunk;
  double* partial =
      static_cast<double*>(be.workspace(WorkSlot::kPartials, (chunks + 1) * sizeof(double)));
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    chunk_sums_kernel<S, kSquares>
        <<<static_cast<unsigned>(chunks), kThreads, 0, be.stream()>>>(x.as<const S>(), n, partial);
  });
  launch_check("chunk sums");
  return ordered_total(be, partial, chunks);
}
}  // namespace

double CudaBackend::sum(Tensor x, int64_t n) {
  note_down(sizeof(double));
  if (n <= 0) return 0.0;
  LLM_REQUIRE(x.dtype == DType::kF32 || x.dtype == DType::kF64,
              "cuda backend: sum of fp32 or fp64 values, got ", dtype_name(x.dtype));
  return chunked_sum<false>(*this, x, n);
}

double CudaBackend::sum_squares(Tensor x, int64_t n) {
  note_down(sizeof(double));
  if (n <= 0) return 0.0;
  LLM_REQUIRE(x.data && dtype_is_float(x.dtype), "cuda backend: sum_squares of a float tensor");
  return chunked_sum<true>(*this, x, n);
}

double CudaBackend::sum_squares_fold(Tensor x, Tensor y, int64_t n, SquaresFold fold) {
  note_down(sizeof(double));
  if (n <= 0) return 0.0;
  LLM_REQUIRE(x.data && y.data && dtype_is_float(x.dtype) && x.dtype == y.dtype,
              "cuda backend: sum_squares_fold of two float tensors of one dtype");
  const int64_t chunks = (n + kBufferChunk - 1) / kBufferChunk;
  double* partial =
      static_cast<double*>(workspace(WorkSlot::kPartials, (chunks + 1) * sizeof(double)));
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    using C = std::conditional_t<std::is_same_v<S, double>, double, float>;  // as accumulate's
    chunk_squares_fold_kernel<S, C><<<static_cast<unsigned>(chunks), kThreads, 0, stream_>>>(
        x.as<S>(), y.as<S>(), n, fold, partial);
  });
  launch_check("sum_squares_fold");
  return ordered_total(*this, partial, chunks);
}

bool CudaBackend::all_finite(Tensor x, int64_t n) {
  note_down(1);
  if (n <= 0) return true;
  LLM_REQUIRE(x.data && dtype_is_float(x.dtype), "cuda backend: all_finite of a float tensor");
  int* bad = static_cast<int*>(workspace(WorkSlot::kPartials, sizeof(int)));
  LLM_CUDA(cudaMemsetAsync(bad, 0, sizeof(int), stream_));
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    finite_kernel<S><<<blocks_for(n), kThreads, 0, stream_>>>(x.as<const S>(), n, bad);
  });
  launch_check("all_finite");
  int host_bad = 0;
  LLM_CUDA(cudaMemcpyAsync(&host_bad, bad, sizeof(int), cudaMemcpyDeviceToHost, stream_));
  synchronize();
  return host_bad == 0;
}

}  // namespace ledgerlm::cuda
