// A Backend wrapper that counts subnormal values (fp32 and fp64, by bit pattern) in what the
// model's ops write, and in a GEMM's inputs, per op and operand: where a run's subnormals arise
// (precision.subnormals, docs/architecture.md). Every counted tensor is copied to the host after
// its op, so it is slow: a diagnosis tool, never on in a measured run.
//
// backend_create(...) wraps its backend in one when LEDGERLM_TEST_COUNT_SUBNORMALS=1 is in the
// environment (a test hook, like the guard backend's); that one prints its table to stderr when
// the backend is destroyed (the end of a run).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "model/backend/wrap/forwarding_backend.h"

namespace ledgerlm {

struct SubnormalCount {
  int64_t subnormal = 0;
  int64_t total = 0;
};

class SubnormalCountBackend : public ForwardingBackend {
 public:
  explicit SubnormalCountBackend(std::unique_ptr<Backend> inner, bool print_when_destroyed = false);
  ~SubnormalCountBackend() override;
  // "gemm.a", "attention_backward.dqkv", ...: counts over every call so far.
  const std::map<std::string, SubnormalCount>& counts() const { return counts_; }
  std::string table() const;

  void gemm(const GemmArgs& args) override;
  void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int64_t batch,
                         int64_t seq, int64_t channels) override;
  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias,
                         int64_t rows, int64_t channels) override;
  void layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                          Tensor weight, Tensor mean, Tensor rstd, int64_t rows,
                          int64_t channels) override;
  void add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                             Tensor weight, Tensor bias, int64_t rows, int64_t channels) override;
  void gelu_forward(Tensor out, Tensor x, int64_t n) override;
  void gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) override;
  void gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout, int64_t rows,
                          int64_t channels) override;
  void attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) override;
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                          const AttentionArgs& args) override;
  void softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets, int64_t rows,
                             int64_t vocab, int64_t padded_vocab, double grad_scale) override;

 private:
  void count(const char* what, Tensor t, int64_t n);

  std::map<std::string, SubnormalCount> counts_;
  bool print_when_destroyed_ = false;
};

}  // namespace ledgerlm
