// The CPU backend: OpenMP kernels plus OpenBLAS GEMM behind the Backend interface.
//
// Every parallel region runs with exactly `threads` threads (num_threads clause), and every
// reduction across rows uses a fixed partition of the work into `threads` chunks whose partial
// results are summed in chunk order, so results are bitwise reproducible for a given thread count.
// The op implementations are spread over cpu_*.cpp files, one concept each.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_isa.h"

namespace ledgerlm::cpu {

struct CpuKernels;
class OneDnnMatmuls;

// Scratch buffers that persist across calls (grown on demand, never shrunk), accounted to
// MemTag::kWorkspace. Each op uses distinct slots for buffers it needs at the same time.
enum class WorkSlot : int {
  kGemmA,      // fp32/fp64 copy of a GEMM operand A
  kGemmB,      // ... of B
  kGemmC,      // ... of C (output in a storage dtype other than the compute dtype)
  kParams,     // widened small parameters (layernorm weight and bias, GEMM bias)
  kPartials,   // per-chunk partial sums of reductions
  kPerThread,  // per-thread rows (attention scores, dropout masks)
  kIndex,      // integer scratch (embedding backward's token grouping)
  kGemmLib,    // the GEMM library's scratchpad (oneDNN matmul primitives)
  kCount
};

class CpuBackend final : public Backend {
 public:
  // `threads` OpenMP threads (0: all cores); fp32 kernels on the `isa` path (cpu_isa.h), which
  // this CPU must support.
  CpuBackend(int threads, CpuIsa isa);
  ~CpuBackend() override;

  std::string name() const override { return "cpu"; }
  int num_threads() const override { return threads_; }
  CpuIsa isa() const { return isa_; }

  MemoryTracker& tracker() override { return tracker_; }
  MemSpace memory_space() const override { return MemSpace::kHost; }
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

  void add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                             Tensor weight, Tensor bias, int64_t rows, int64_t channels) override;
  void gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout, int64_t rows,
                          int64_t channels) override;

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

  void optimizer_op(const OptimOp& op, double* sums) override;
  void optimizer_ops(const OptimOp* ops, int64_t count) override;
  // ---- rotary positions and QK-norm (model.position = rope, model.qk_norm) ----
  void rope(Tensor x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads, int64_t head_dim,
            int64_t stride, double theta, bool inverse) override;
  void head_rmsnorm_forward(Tensor x, Tensor rstd, int64_t rows, int64_t heads, int64_t head_dim,
                            int64_t stride, double eps) override;
  void head_rmsnorm_backward(Tensor dx, Tensor y, Tensor rstd, int64_t rows, int64_t heads,
                             int64_t head_dim, int64_t stride) override;

  // A workspace buffer of at least `bytes` bytes (64-byte aligned, contents unspecified).
  void* workspace(WorkSlot slot, size_t bytes);
  // This backend's oneDNN matmul primitives (created on first use; builds with oneDNN only).
  OneDnnMatmuls& onednn();

 private:
  void layernorm_forward_impl(Tensor a, Tensor b, Tensor out, Tensor mean, Tensor rstd, Tensor x,
                              Tensor weight, Tensor bias, int64_t rows, int64_t channels);

  int threads_;
  CpuIsa isa_;
  const CpuKernels* kernels_;
  MemoryTracker tracker_;
  std::array<Buffer, static_cast<size_t>(WorkSlot::kCount)> work_;
  std::unique_ptr<OneDnnMatmuls> onednn_;
  // optimizer_ops's pieces: op index and element range (kept: a step allocates nothing).
  struct OptimPiece {
    int64_t op, begin, count;
  };
  std::vector<OptimPiece> optim_pieces_;
};

// The CPU backend on an explicit path (tests run every path the CPU supports side by side);
// backend_create_cpu(threads) takes cpu_isa_default().
std::unique_ptr<Backend> backend_create_cpu_isa(int threads, CpuIsa isa);

// The OpenBLAS build configuration and the core kernel set it chose at load time, e.g.
// "OpenBLAS 0.3.21 ... USE_OPENMP ... | core SkylakeX" (to confirm the OpenMP build is loaded).
std::string cpu_blas_config();

// OpenBLAS 0.3.21 does not recognise recent Xeons (family 6 model 207 here) and falls back to
// its generic "Prescott" kernels, about 3x slower sgemm than with SkylakeX kernels. The core is
// chosen when the library loads, so only the environment variable OPENBLAS_CORETYPE set before
// the process starts can fix it. Returns the value to set ("Cooperlake", "SkylakeX", "Haswell")
// when the loaded core is the fallback and this CPU can do better, else "". With
// LEDGERLM_CPU_ISA=avx2 it returns "Haswell" (unless that core is loaded): the forced path caps
// the GEMM library's kernels too.
std::string cpu_blas_better_coretype();

}  // namespace ledgerlm::cpu
