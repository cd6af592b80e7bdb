// CudaBackend construction, device memory under the tracker, copies and the stream.
//
// One non-blocking stream per backend carries every kernel, copy and cuBLAS call, so ops are
// ordered as they are called. Copies to the host and the scalar results of reductions
// synchronize the stream; everything else is asynchronous.
#include "model/backend/cuda/cuda_backend.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "model/backend/cuda/cuda_device.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace cuda {

void cuda_check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return;
  fail(error_message("cuda backend: ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                     ")"));
}

bool sync_check_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("LEDGERLM_CUDA_SYNC_CHECK");
    return env != nullptr && env[0] != '\0' && std::string(env) != "0";
  }();
  return enabled;
}

void sync_check(const char* what) {
  const cudaError_t e = cudaDeviceSynchronize();
  if (e == cudaSuccess) return;
  fail(error_message("cuda backend: ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                     ") while the op ran (LEDGERLM_CUDA_SYNC_CHECK)"));
}

void cublas_check(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  fail(error_message("cuda backend: ", what, ": cuBLAS status ", static_cast<int>(s)));
}

void* DeviceAllocator::allocate(size_t bytes) {
  void* p = nullptr;
  const size_t rounded = (bytes + 255) / 256 * 256;
  if (cudaMalloc(&p, rounded) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky out-of-memory error; Buffer reports it
    return nullptr;
  }
  if (cudaMemsetAsync(p, 0, rounded, stream_) != cudaSuccess) {
    cudaFree(p);
    return nullptr;
  }
  return p;
}

void DeviceAllocator::deallocate(void* data, size_t) {
  cudaFree(data);  // synchronizes the device: no queued kernel still uses it
}

namespace {

int64_t device_used_bytes(int64_t* total = nullptr) {
  size_t free_b = 0, total_b = 0;
  LLM_CUDA(cudaMemGetInfo(&free_b, &total_b));
  if (total) *total = static_cast<int64_t>(total_b);
  return static_cast<int64_t>(total_b - free_b);
}

cudaStream_t make_stream(int device) {
  LLM_CUDA(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  LLM_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

}  // namespace

CudaBackend::CudaBackend(int device)
    : device_(device), stream_(make_stream(device)), allocator_(stream_) {
  LLM_CUBLAS(cublasLtCreate(&lt_));
  LLM_CUBLAS(cublasCreate(&blas_));
  LLM_CUBLAS(cublasSetStream(blas_, stream_));
  // cuBLAS's own workspace comes from ours (tracked), not from its private cudaMalloc.
  void* ws = workspace(WorkSlot::kCublas, kCublasWorkspace);
  LLM_CUBLAS(cublasSetWorkspace(blas_, ws, kCublasWorkspace));
  // Bitwise reproducibility: no atomics-based cuBLAS paths.
  LLM_CUBLAS(cublasSetAtomicsMode(blas_, CUBLAS_ATOMICS_NOT_ALLOWED));
  synchronize();
  baseline_used_ = device_used_bytes() - tracker_.total().current;
}

CudaBackend::~CudaBackend() {
  cudaStreamSynchronize(stream_);
  cudnn_.reset();  // its handle is bound to stream_ and its graphs to the workspace
  for (Buffer& b : work_) b.reset();
  quant_maps_.reset();
  if (blas_) cublasDestroy(blas_);
  if (lt_) cublasLtDestroy(lt_);
  if (stream_) cudaStreamDestroy(stream_);
}

Buffer CudaBackend::allocate(MemTag tag, size_t bytes) {
  return Buffer(&allocator_, &tracker_, tag, bytes);
}

void* CudaBackend::workspace(WorkSlot slot, size_t bytes) {
  Buffer& buf = work_[static_cast<size_t>(slot)];
  if (buf.bytes() < bytes) {
    synchronize();
    buf.reset();  // free first so the peak never counts the old and the new buffer together
    buf = Buffer(&allocator_, &tracker_, MemTag::kWorkspace, (bytes + 4095) / 4096 * 4096);
    if (slot == WorkSlot::kCublas && blas_ != nullptr)
      LLM_CUBLAS(cublasSetWorkspace(blas_, buf.data(), buf.bytes()));
  }
  return buf.data();
}

std::string CudaBackend::device_name() const {
  cudaDeviceProp prop{};
  LLM_CUDA(cudaGetDeviceProperties(&prop, device_));
  return prop.name;
}

void CudaBackend::synchronize() {
  LLM_CUDA(cudaStreamSynchronize(stream_));
  LLM_CUDA(cudaGetLastError());
}

CudaMemoryReport CudaBackend::memory_report() {
  synchronize();
  CudaMemoryReport r;
  r.tracked_current = tracker_.total().current;
  r.tracked_peak = tracker_.total().peak;
  r.device_used = device_used_bytes(&r.device_total);
  r.baseline_used = baseline_used_;
  return r;
}

bool CudaBackend::device_memory(DeviceMemoryInfo* info) {
  const CudaMemoryReport r = memory_report();
  info->used = r.device_used;
  info->baseline = r.baseline_used;
  info->total = r.device_total;
  return true;
}

void CudaBackend::copy_from_host(Tensor dst, const void* src, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(dst.data != nullptr && src != nullptr, "cuda backend: copy_from_host of a null");
  const int64_t bytes = n * static_cast<int64_t>(dtype_size(dst.dtype));
  note_up(bytes);
  // Pageable source: the call returns once the bytes are staged, so `src` may be reused at once.
  LLM_CUDA(
      cudaMemcpyAsync(dst.data, src, static_cast<size_t>(bytes), cudaMemcpyHostToDevice, stream_));
}

void CudaBackend::copy_to_host(void* dst, Tensor src, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(dst != nullptr && src.data != nullptr, "cuda backend: copy_to_host of a null");
  const int64_t bytes = n * static_cast<int64_t>(dtype_size(src.dtype));
  note_down(bytes);
  LLM_CUDA(
      cudaMemcpyAsync(dst, src.data, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream_));
  synchronize();
}

void CudaBackend::copy(Tensor dst, Tensor src, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(dst.data != nullptr && src.data != nullptr, "cuda backend: copy of a null tensor");
  LLM_REQUIRE(dst.dtype == src.dtype, "cuda backend: copy from ", dtype_name(src.dtype), " to ",
              dtype_name(dst.dtype), " (use convert to change the dtype)");
  const size_t bytes = static_cast<size_t>(n) * dtype_size(dst.dtype);
  if (dst.data == src.data) return;
  LLM_CUDA(cudaMemcpyAsync(dst.data, src.data, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaBackend::zero(Tensor t, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(t.data != nullptr, "cuda backend: zero() on a null tensor");
  LLM_CUDA(cudaMemsetAsync(t.data, 0, static_cast<size_t>(n) * dtype_size(t.dtype), stream_));
}

}  // namespace cuda

std::unique_ptr<Backend> backend_create_cuda(int device) {
  const int count = cuda_device_count();
  LLM_REQUIRE(count > 0, "cuda backend: no CUDA device is visible (",
              cuda_device_description(device), ")");
  LLM_REQUIRE(device >= 0 && device < count, "cuda backend: device ", device, " does not exist (",
              count, " visible)");
  return std::make_unique<cuda::CudaBackend>(device);
}

}  // namespace ledgerlm
