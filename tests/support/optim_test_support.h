// Test support for the optimizer tests: a Backend test double that only allocates (the optimizers
// need nothing else from a backend), a hand-built parameter table, and deterministic random data.
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_optim.h"
#include "model/param_table.h"
#include "optim/optimizer.h"

namespace ledgerlm::testing {

class TestBackend : public Backend {
 public:
  std::string name() const override { return "test"; }
  int num_threads() const override { return 1; }
  MemoryTracker& tracker() override { return tracker_; }
  MemSpace memory_space() const override { return MemSpace::kHost; }
  Buffer allocate(MemTag tag, size_t bytes) override { return Buffer(&tracker_, tag, bytes); }
  void copy_from_host(Tensor, const void*, int64_t) override { no(); }
  void copy_to_host(void*, Tensor, int64_t) override { no(); }
  void copy(Tensor, Tensor, int64_t) override { no(); }
  void zero(Tensor, int64_t) override { no(); }
  void convert(Tensor, Tensor, int64_t, Rounding, uint64_t, uint64_t) override { no(); }
  void accumulate(Tensor, Tensor, int64_t) override { no(); }
  double sum_squares(Tensor, int64_t) override { no(); }
  double sum_squares_fold(Tensor, Tensor, int64_t, SquaresFold) override { no(); }
  bool all_finite(Tensor, int64_t) override { no(); }
  void scale(Tensor, int64_t, double) override { no(); }
  void gemm(const GemmArgs&) override { no(); }
  void bias_backward(Tensor, Tensor, int64_t, int64_t) override { no(); }
  void embedding_forward(Tensor, Tensor, Tensor, Tensor, int64_t, int64_t, int64_t) override {
    no();
  }
  void embedding_backward(Tensor, Tensor, Tensor, Tensor, int64_t, int64_t, int64_t) override {
    no();
  }
  double sum(Tensor, int64_t) override { no(); }
  void attention_decode(Tensor, Tensor, Tensor, Tensor, int64_t, int64_t, int64_t,
                        int64_t) override {
    no();
  }
  void layernorm_forward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, int64_t,
                         int64_t) override {
    no();
  }
  void layernorm_backward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, int64_t,
                          int64_t) override {
    no();
  }
  void add(Tensor, Tensor, Tensor, int64_t) override { no(); }
  void gelu_forward(Tensor, Tensor, int64_t) override { no(); }
  void gelu_backward(Tensor, Tensor, Tensor, int64_t) override { no(); }
  void dropout(Tensor, int64_t, double, const DropoutKey&) override { no(); }
  void attention_forward(Tensor, Tensor, Tensor, const AttentionArgs&) override { no(); }
  void attention_backward(Tensor, Tensor, Tensor, Tensor, Tensor, const AttentionArgs&) override {
    no();
  }
  void softmax_cross_entropy(Tensor, Tensor, Tensor, int64_t, int64_t, int64_t, double) override {
    no();
  }
  // MLP variants and the logit soft-cap.
  void relu2_forward(Tensor, Tensor, int64_t) override { no(); }
  void relu2_backward(Tensor, Tensor, Tensor, int64_t) override { no(); }
  void swiglu_forward(Tensor, Tensor, Tensor, int64_t) override { no(); }
  void swiglu_backward(Tensor, Tensor, Tensor, Tensor, Tensor, int64_t) override { no(); }
  void softcap_forward(Tensor, Tensor, int64_t, double) override { no(); }
  void softcap_cross_entropy(Tensor, Tensor, Tensor, int64_t, int64_t, int64_t, double,
                             double) override {
    no();
  }
  // Rotary positions and QK-norm (model.position = rope, model.qk_norm).
  void rope(Tensor, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, bool) override {
    no();
  }
  void head_rmsnorm_forward(Tensor, Tensor, int64_t, int64_t, int64_t, int64_t, double) override {
    no();
  }
  void head_rmsnorm_backward(Tensor, Tensor, Tensor, int64_t, int64_t, int64_t, int64_t) override {
    no();
  }
  // Norms and biases (model.norm, norm_weight, bias).
  void norm_forward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, const NormArgs&) override {
    no();
  }
  void norm_backward(Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor,
                     const NormArgs&) override {
    no();
  }
  // The optimizers' kernels: the CPU implementation, on this backend's host memory.
  void optimizer_op(const OptimOp& op, double* sums) override { cpu::cpu_optimizer_op(op, sums); }

 private:
  [[noreturn]] static void no() { throw std::logic_error("TestBackend: op not available"); }
  MemoryTracker tracker_;
};

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  ParamKind kind = ParamKind::kMatrix;
  int64_t real_rows = 0;  // leading rows that are real (ParamInfo::hf_rows); 0: all of them
};

// One unit, tensors in the given order, each starting at a multiple of `block`; the total is
// padded to a multiple of block x world. decay: matrices and embeddings.
inline ParamTable make_table(const std::vector<TensorSpec>& specs, int64_t block = 256,
                             int64_t world = 1) {
  ParamTable t;
  t.options.block = block;
  t.options.world = world;
  t.units.push_back({"unit", 0, 0, 0, {}});
  int64_t cursor = 0;
  for (const auto& s : specs) {
    ParamInfo p;
    p.name = s.name;
    p.shape = s.shape;
    p.kind = s.kind;
    p.numel = 1;
    for (int64_t d : s.shape) p.numel *= d;
    p.hf_rows = s.real_rows > 0 ? s.real_rows : s.shape[0];
    p.offset = p.offset_in_unit = cursor;
    cursor = (cursor + p.numel + block - 1) / block * block;
    t.units[0].params.push_back(static_cast<int>(t.params.size()));
    t.params.push_back(p);
    t.num_params += p.numel;
  }
  t.units[0].used = cursor;
  t.total = t.units[0].size = (cursor + block * world - 1) / (block * world) * (block * world);
  t.logical_total = t.total;
  return t;
}

// Normal(0, stddev) values from a fixed seed; padding positions of `table` set to `pad`.
inline std::vector<float> random_flat(const ParamTable& table, uint64_t seed, double stddev,
                                      float pad = 0.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> dist(0.0, stddev);
  std::vector<float> x(static_cast<size_t>(table.total), pad);
  for (const auto& p : table.params)
    for (int64_t i = 0; i < p.numel; ++i) x[p.offset + i] = static_cast<float>(dist(gen));
  return x;
}

}  // namespace ledgerlm::testing
