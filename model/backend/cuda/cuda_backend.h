// The CUDA backend: backend.h on one NVIDIA GPU. cuBLASLt GEMMs and our own kernels, one stream,
// device memory from cudaMalloc accounted to the tracking allocator (no managed memory).
//
// Kernels follow the CPU backend's arithmetic (model/backend/cpu is the reference): the shared
// per-element functions (LLM_HD: dtype conversions, Philox draws, optimizer updates) are the
// same source on both, every reduction has a fixed order (no order-dependent float atomics), so
// a rerun on the same GPU is bitwise identical. Files, one concept each: cuda_backend.cu (this
// class: memory, copies, counters), cuda_gemm.cu, cuda_elementwise.cu, cuda_layernorm.cu,
// cuda_embedding.cu, cuda_crossentropy.cu, cuda_attention.cu, cuda_casts.cu, cuda_reduce.cu,
// cuda_optim.cu.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/backend/backend.h"

namespace ledgerlm::cuda {

class CudnnAttention;  // cudnn_attention.h
// Deletes a CudnnAttention where its type is complete (cuda_attention.cu): this header and
// cuda_backend.cu stay free of it.
void cudnn_attention_delete(CudnnAttention* attention);

// Throws Error naming `what` when `e` is not cudaSuccess (and for cuBLAS statuses).
void cuda_check(cudaError_t e, const char* what);
void cublas_check(cublasStatus_t s, const char* what);
#define LLM_CUDA(call) ::ledgerlm::cuda::cuda_check((call), #call)
#define LLM_CUBLAS(call) ::ledgerlm::cuda::cublas_check((call), #call)

// LEDGERLM_CUDA_SYNC_CHECK=1 (read once): every kernel launch and cuBLAS call is followed by a
// device synchronize, and an execution error is reported with the op's name (slow: for finding
// which op faulted, never for timing).
bool sync_check_enabled();
// Waits for the device and throws Error naming `what` (and that the sync check caught it) when
// the work before it failed.
void sync_check(const char* what);

// cudaMalloc'd memory for Buffers (zero-filled on the backend's stream before first use).
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(cudaStream_t stream) : stream_(stream) {}
  MemSpace space() const override { return MemSpace::kDevice; }
  void* allocate(size_t bytes) override;
  void deallocate(void* data, size_t bytes) override;

 private:
  cudaStream_t stream_;
};

// Scratch buffers that persist across calls (grown on demand), accounted to kWorkspace.
enum class WorkSlot : int {
  kGemmA,     // A in the compute dtype
  kGemmB,     // B ...
  kGemmC,     // C computed in fp32/fp64 when stored otherwise
  kGemmBias,  // widened bias
  kCublas,    // cuBLASLt / cuBLAS workspace
  kPartials,  // per-chunk partial sums (double)
  kIndex,     // integer scratch (embedding sort)
  kScratch,   // attention row statistics, decode scores, optimizer side arrays
  kScratch2,
  kOptimSide,  // optimizer side arrays uploaded from the host (Adafactor statistics)
  kCudnnQkv,   // precision.attention = cudnn: qkv in bf16 [B,T,3C]
  kCudnnOut,   // ... the attention output in bf16 [B,T,C]
  kCudnnDout,  // ... its gradient in bf16 [B,T,C]
  kCudnnDqkv,  // ... dq, dk, dv in bf16 [B,T,3C]
  kCudnnWork,  // ... cuDNN's own workspace (the deterministic backward's dP buffer)
  kCount
};

// The ledger's device figures: what the tracker holds against what the driver reports in use.
struct CudaMemoryReport {
  int64_t tracked_current = 0;  // bytes the tracker holds now (all components)
  int64_t tracked_peak = 0;
  int64_t device_used = 0;    // cudaMemGetInfo total - free, now
  int64_t baseline_used = 0;  // the same right after the context was created
  int64_t device_total = 0;
  // device_used - baseline_used - tracked_current: cuBLAS handles, kernels' module memory, the
  // allocator's rounding; small and constant when everything large goes through the tracker.
  int64_t untracked() const { return device_used - baseline_used - tracked_current; }
};

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int num_threads() const override { return 1; }
  std::string device_name() const override;

  MemoryTracker& tracker() override { return tracker_; }
  MemSpace memory_space() const override { return MemSpace::kDevice; }
  bool device_memory(DeviceMemoryInfo* info) override;
  Buffer allocate(MemTag tag, size_t bytes) override;
  void copy_from_host(Tensor dst, const void* src, int64_t n) override;
  void copy_to_host(void* dst, Tensor src, int64_t n) override;
  void copy(Tensor dst, Tensor src, int64_t n) override;
  void zero(Tensor t, int64_t n) override;
  void convert(Tensor dst, Tensor src, int64_t n, Rounding rounding = Rounding::kNearest,
               uint64_t seed = 0, uint64_t stream_offset = 0) override;
  void accumulate(Tensor dst, Tensor src, int64_t n) override;
  double sum(Tensor x, int64_t n) override;
  double sum_squares(Tensor x, int64_t n) override;
  double sum_squares_fold(Tensor x, Tensor y, int64_t n, SquaresFold fold) override;
  bool all_finite(Tensor x, int64_t n) override;
  void scale(Tensor x, int64_t n, double s) override;

  void gemm(const GemmArgs& args) override;
  void bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) override;

  void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int64_t batch,
                         int64_t seq, int64_t channels) override;
  void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, int64_t batch,
                          int64_t seq, int64_t channels) override;

  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias,
                         int64_t rows, int64_t channels) override;
  void layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                          Tensor weight, Tensor mean, Tensor rstd, int64_t rows,
                          int64_t channels) override;
  // model.norm
  void norm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias,
                    const NormArgs& args) override;
  void norm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x, Tensor weight,
                     Tensor mean, Tensor rstd, const NormArgs& args) override;

  void add(Tensor out, Tensor a, Tensor b, int64_t n) override;
  void gelu_forward(Tensor out, Tensor x, int64_t n) override;
  void gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) override;
  void dropout(Tensor x, int64_t n, double p, const DropoutKey& key) override;

  void attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) override;
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                          const AttentionArgs& args) override;
  void attention_decode(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t positions,
                        int64_t heads, int64_t channels, int64_t stride) override;
  void softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets, int64_t rows,
                             int64_t vocab, int64_t padded_vocab, double grad_scale) override;

  // MLP variants and the logit soft-cap (model.mlp, model.logit_softcap).
  void relu2_forward(Tensor out, Tensor x, int64_t n) override;
  void relu2_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) override;
  void swiglu_forward(Tensor out, Tensor gate, Tensor up, int64_t n) override;
  void swiglu_backward(Tensor dgate, Tensor dup, Tensor gate, Tensor up, Tensor dout,
                       int64_t n) override;
  void softcap_forward(Tensor y, Tensor x, int64_t n, double cap) override;
  void softcap_cross_entropy(Tensor losses, Tensor logits, Tensor targets, int64_t rows,
                             int64_t vocab, int64_t padded_vocab, double grad_scale,
                             double cap) override;

  // ---- rotary positions and QK-norm (model.position = rope, model.qk_norm) ----
  void rope(Tensor x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads, int64_t head_dim,
            int64_t stride, double theta, bool inverse) override;
  void head_rmsnorm_forward(Tensor x, Tensor rstd, int64_t rows, int64_t heads, int64_t head_dim,
                            int64_t stride, double eps) override;
  void head_rmsnorm_backward(Tensor dx, Tensor y, Tensor rstd, int64_t rows, int64_t heads,
                             int64_t head_dim, int64_t stride) override;
  void optimizer_op(const OptimOp& op, double* sums) override;

  // ---- CUDA specifics -------------------------------------------------------------------------
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  void* native_stream() override { return stream_; }
  cublasLtHandle_t lt() const { return lt_; }
  cublasHandle_t blas() const { return blas_; }
  // A device workspace buffer of at least `bytes` bytes (contents unspecified). Growing one
  // synchronizes the stream first (the old buffer may still be in use by queued kernels).
  void* workspace(WorkSlot slot, size_t bytes);
  size_t cublas_workspace_bytes() const { return kCublasWorkspace; }
  // Waits for everything queued on the stream (cudaStreamSynchronize); an asynchronous kernel
  // error is an Error naming the call and the CUDA error.
  void synchronize() override;
  // The tracker's totals next to cudaMemGetInfo (the device counterpart of the CPU's VmHWM check).
  CudaMemoryReport memory_report();
  // Counts bytes moved by host <-> device staging inside ops (e.g. Adafactor's host statistics).
  void count_up(int64_t bytes) { note_up(bytes); }
  void count_down(int64_t bytes) { note_down(bytes); }

  // Forward and backward calls cuDNN's attention ran (0 when it never ran).
  int64_t cudnn_attention_calls() const;

  // The 8-bit optimizer's two QuantMaps (quant8.h) in device memory, uploaded on first use.
  const void* quant_maps();

  static constexpr size_t kCublasWorkspace = size_t{32} << 20;

 private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  int64_t baseline_used_ = 0;
  MemoryTracker tracker_;
  DeviceAllocator allocator_;
  std::array<Buffer, static_cast<size_t>(WorkSlot::kCount)> work_;
  Buffer quant_maps_;
  // precision.attention = cudnn, made on the first such call (cudnn_attention.h).
  std::unique_ptr<CudnnAttention, void (*)(CudnnAttention*)> cudnn_{nullptr,
                                                                    cudnn_attention_delete};
  CudnnAttention& cudnn_attention();
};

}  // namespace ledgerlm::cuda
