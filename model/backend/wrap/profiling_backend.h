// A Backend decorator that times every op (wall clock, per op name) and forwards to the real
// backend: `ledgerlm bench` uses it for the time split by op. Costs two clock reads per op.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "model/backend/backend.h"

namespace ledgerlm {

struct OpTime {
  double seconds = 0.0;
  int64_t calls = 0;
  double flops = 0.0;  // GEMMs only: 2 m n k per call
  GemmArgs shape;      // GEMMs only: the last call's arguments (sizes, flags, dtypes)
};

class ProfilingBackend : public Backend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}
  // The timed backend itself (calls on it are not timed).
  Backend& inner() { return *inner_; }
  const std::map<std::string, OpTime>& times() const { return times_; }
  // GEMM time by shape, keyed like "NT 2048x1152x384 +bias" (op(A) op(B) m x n x k, then
  // +bias / +=C), so the GEMM share can be read as GFLOP/s per layer shape.
  const std::map<std::string, OpTime>& gemm_times() const { return gemm_times_; }
  void reset_times() {
    times_.clear();
    gemm_times_.clear();
  }

  std::string name() const override { return inner_->name(); }
  int num_threads() const override { return inner_->num_threads(); }
  MemoryTracker& tracker() override { return inner_->tracker(); }
  MemSpace memory_space() const override { return inner_->memory_space(); }
  Buffer allocate(MemTag tag, size_t bytes) override { return inner_->allocate(tag, bytes); }
  void copy_from_host(Tensor dst, const void* src, int64_t n) override;
  void copy_to_host(void* dst, Tensor src, int64_t n) override;
  void copy(Tensor dst, Tensor src, int64_t n) override;
  void zero(Tensor t, int64_t n) override;
  void convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
               uint64_t stream_offset) override;
  void accumulate(Tensor dst, Tensor src, int64_t n) override;
  double sum_squares(Tensor x, int64_t n) override;
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
  double sum(Tensor x, int64_t n) override;
  const TransferStats& transfers() const override { return inner_->transfers(); }
  void reset_transfers() override { inner_->reset_transfers(); }
  void optimizer_op(const OptimOp& op, double* sums) override;
  void optimizer_ops(const OptimOp* ops, int64_t count) override;

 private:
  std::unique_ptr<Backend> inner_;
  std::map<std::string, OpTime> times_;
  std::map<std::string, OpTime> gemm_times_;
};

}  // namespace ledgerlm
