// ForwardingBackend: a Backend that forwards every call to an inner Backend. The backends that
// wrap another one (the guard backend, the profiling backend) derive from it and override only
// what they change, so none of them repeats the interface; a method added to Backend is added
// here once and reaches every wrapper.
//
// Around each op (every call that reaches the backend's memory: copies, conversions, reductions,
// the model's ops and the optimizer's kernels; not the queries name, device_name, num_threads,
// tracker, memory_space, device_memory, transfers, nor allocate and synchronize) it calls op_begin
// and op_end with the op's name, so a wrapper that acts the same way around every op overrides
// those two alone. op_end also runs when the op throws, with the exception in flight: it must not
// throw then; otherwise it may (a device error that a synchronize in it reports). Calls do not
// nest: the inner backend's own calls (a fused op's default composition, optimizer_ops' default
// loop) stay inside the inner backend.
#pragma once

#include <memory>
#include <string>

#include "model/backend/backend.h"

namespace ledgerlm {

class ForwardingBackend : public Backend {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner);
  // Forwards to a backend owned elsewhere, which must outlive this one.
  explicit ForwardingBackend(Backend& inner);
  ~ForwardingBackend() override;

  // The wrapped backend (calls on it bypass the wrapper).
  Backend& inner() { return *inner_; }
  const Backend& inner() const { return *inner_; }

  const TransferStats& transfers() const override;
  void reset_transfers() override;
  std::string name() const override;
  int num_threads() const override;
  std::string device_name() const override;
  void synchronize() override;

  MemoryTracker& tracker() override;
  MemSpace memory_space() const override;
  bool device_memory(DeviceMemoryInfo* info) override;
  void* native_stream() override;
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
  void add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                             Tensor weight, Tensor bias, int64_t rows, int64_t channels) override;
  void gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout, int64_t rows,
                          int64_t channels) override;
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
  void optimizer_ops(const OptimOp* ops, int64_t count) override;

 protected:
  // Called before and after every forwarded op with its Backend method's name.
  virtual void op_begin(const char* op) { (void)op; }
  virtual void op_end(const char* op) { (void)op; }

 private:
  class Op;  // op_begin now, op_end when it leaves scope
  std::unique_ptr<Backend> owned_;
  Backend* inner_ = nullptr;
};

}  // namespace ledgerlm
