// GPT-2 forward and backward, written once against the Backend interface.
//
// Parameters, gradients and activations are flat buffers described by the ParamTable and the
// activation list; the model never allocates inside forward/backward. Activation memory is one
// arena holding exactly the list's saved activations for (B, T, recompute), and one scratch
// holding its scratch buffers; see activation_list.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/activation_list.h"
#include "model/backend/backend.h"
#include "model/model_config.h"
#include "model/param_table.h"
#include "model/unit_access.h"

namespace ledgerlm {

// One buffer plan() carved: its name in the activation list and its bytes (64-byte aligned).
struct CarvedBuffer {
  std::string name;
  int64_t bytes = 0;
};

// Per-call options of forward: travel as data.
struct ForwardOptions {
  bool training = true;  // dropout active (when model.dropout > 0)
  uint64_t seed = 0;     // dropout key
  uint64_t step = 0;     // dropout masks differ per step (DropoutKey::site)
  // Index in the step's global batch of batch row 0: each sequence's dropout mask follows its
  // place in the global batch, so any split into micro-batches (or ranks) draws the same masks.
  uint64_t first_sequence = 0;
};

class GptModel {
 public:
  // act_dtype: kF32 normally, kF64 for gradient checks (then params/grads must be kF64 too).
  GptModel(const ModelConfig& config, const ParamTable& table, Backend& backend, DType param_dtype,
           DType grad_dtype, DType act_dtype = DType::kF32);
  ~GptModel();

  const ModelConfig& config() const { return config_; }
  // precision.matmul = bf16: the linear layers' GEMMs (forward, input and weight gradients) round
  // both operands to bf16 and accumulate in fp32 (GemmArgs::bf16_inputs). Off by default.
  void set_bf16_matmul(bool on);
  // precision.matmul = tf32 (GemmArgs::tf32; CUDA only).
  void set_tf32_matmul(bool on);
  // precision.attention resolved: which implementation the backend runs attention with
  // (AttentionArgs::impl). kOwn by default.
  void set_attention_impl(AttentionImpl impl);
  const ParamTable& table() const { return table_; }

  // Allocates the activation arena for micro-batch B and sequence T (re-plans if they change).
  void plan(int64_t batch, int64_t seq);
  // Bytes of the activation arena and of the workspace for the current plan.
  int64_t activation_bytes() const;
  int64_t workspace_bytes() const;
  // Every buffer the current plan carved from the arena (saved activations) and from the
  // scratch, in carving order: what the activation list says, as the allocator did it.
  const std::vector<CarvedBuffer>& carved_activations() const;
  const std::vector<CarvedBuffer>& carved_scratch() const;

  // Runs the model on tokens [B, T]. With targets: returns the mean cross-entropy over B*T
  // (nats) and keeps what backward needs; without: returns 0 and leaves logits readable.
  // Weights come unit by unit from `units`, with the announcements of unit_access.h.
  // Host arrays [B, T] (checked against the vocabulary, then uploaded) or int32 tensors in the
  // backend's memory; targets may be null / empty.
  double forward(UnitAccess& units, const int32_t* tokens, const int32_t* targets, int64_t batch,
                 int64_t seq, const ForwardOptions& options = {});
  double forward(UnitAccess& units, Tensor tokens, Tensor targets, int64_t batch, int64_t seq,
                 const ForwardOptions& options = {});
  // grads += loss_scale * d(mean loss)/d(params), for the batch of the last forward.
  void backward(UnitAccess& units, double loss_scale);
  // The same over flat buffers laid out by the table (FlatUnits).
  double forward(Tensor params, const int32_t* tokens, const int32_t* targets, int64_t batch,
                 int64_t seq, const ForwardOptions& options = {});
  void backward(Tensor params, Tensor grads, double loss_scale);
  // Per-token losses of the last forward with targets ([B*T], act dtype).
  Tensor token_losses() const;
  // Sum of the first `count` of them, reduced on the backend (only the sum comes to the host).
  double token_loss_sum(int64_t count) const;
  // Logits of the last forward ([B*T, padded_vocab], act dtype). Valid after a forward
  // without targets (with targets they are overwritten by their gradient in training).
  Tensor logits() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  ModelConfig config_;
  ParamTable table_;
};

// Elements (gradient dtype) of the model's sink for gradients of frozen tensors that a kernel
// computes anyway (norm weights, biases, one embedding of two); 0 with nothing frozen.
int64_t gpt_frozen_sink_elements(const ParamTable& table, const ModelConfig& config);

// Bytes of the model's micro-batch id buffer (token ids and targets, int32) in backend memory,
// allocated by plan() and counted as MemTag::kData.
int64_t gpt_batch_ids_bytes(int64_t batch, int64_t seq);

// Fills a flat parameter buffer (any float dtype) with the GPT-2 init of the table:
// N(0, std) from the counter RNG keyed on (seed, parameter index, element), ones, zeros.
void gpt_init_params(const ParamTable& table, Tensor params, uint64_t seed, Backend& backend);
// The init of tensor `param` alone (numel fp32 values in host memory): what gpt_init_params
// writes at its offset. The values do not depend on the layout, so every rank of a sharded run
// generates the same numbers for the part it holds.
void gpt_init_tensor(const ParamTable& table, int param, uint64_t seed, float* out);

}  // namespace ledgerlm
