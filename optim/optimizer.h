// The Optimizer interface: state for a range of the flat buffers, one step per call.
//
// An optimizer owns the state for a list of tensor parts (OptimShard): every tensor on one rank,
// or this rank's pieces under ZeRO, as the training step's placement table lists them
// (train/step/placement.h). Its states are compact buffers of the shard's length; each part says
// where its elements sit in them, in the master weights and in the gradients step() is given (e.g.
// the fp32 weights updated in place in the whole compute copy, or gradients reduce-scattered in
// place). It updates FP32 master weights from gradients of any float dtype, multiplying the
// gradients on the fly by `grad_scale` (loss-scale unscaling and the clip factor in one number), so
// no extra pass is needed. Per-tensor quantities (LAMB/LARS trust ratios, Adafactor RMS) are
// computed from partial sums over the ranges reduced by `reduce` (identity on one rank), so the
// result is the same for any sharding. Padding elements between tensors are left untouched.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/param_table.h"
#include "optim/optim_config.h"

namespace ledgerlm {

// Per-step values: travel as data, never rebuilt state.
struct OptimStepInfo {
  double lr = 0.0;          // scheduled LR for this step (before per-group multipliers)
  int64_t step = 1;         // 1-based optimizer step (bias correction, Adafactor's t)
  double grad_scale = 1.0;  // multiply every gradient element by this before use
  // Sums `count` doubles across ranks in place (nullptr: single rank).
  std::function<void(double* values, int count)> reduce;
  // The run's length in optimizer steps (the LR schedule's estimate under token or time budgets):
  // AdEMAMix's alpha and beta3 warmups default to it.
  int64_t total_steps = 0;
  // The compute copy (whole, or this rank's shard at ZeRO-3; OptimPart::compute_at addresses it):
  // an optimizer whose weights in training differ from its master (Schedule-Free trains at y,
  // keeps x) writes it, and says so by writes_compute_copy().
  Tensor compute;
  // An all-to-all of fp32 values with sizes per rank: `send` holds the blocks for ranks 0, 1, ...
  // end to end (send_counts[r] values for rank r), `recv` receives rank r's block for this rank
  // at the sum of recv_counts[0..r). Whole-tensor work (Muon's orthogonalisation) gathers its
  // matrices' pieces to their owners and scatters the results back with it. nullptr: one rank.
  std::function<void(Tensor send, const std::vector<int64_t>& send_counts, Tensor recv,
                     const std::vector<int64_t>& recv_counts)>
      exchange;
};

// Elements [begin, end) of the flat layout.
struct OptimRange {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// One tensor part an optimizer updates: elements [param_begin, param_begin + count) of table
// row `param`, trained in optimizer group `group` (optim_groups.h). Element j of the part is
// element local + j of the compact state buffers, master[master_at + j] and grads[grad_at + j].
struct OptimPart {
  int param = -1;
  int group = 0;
  int64_t param_begin = 0, count = 0;
  int64_t local = 0, master_at = 0, grad_at = 0;
  int64_t compute_at = 0;  // the part's first element in OptimStepInfo::compute
};

// Rank `rank` holds elements [begin, begin + count) of a tensor.
struct OptimHolder {
  int rank = 0;
  int64_t begin = 0, count = 0;
};
// Where one trained tensor's parts are across the ranks, and the rank that does its whole-tensor
// work (the placement table's owner).
struct OptimTensorRanks {
  int param = -1;
  int owner = 0;
  std::vector<OptimHolder> holders;  // in rank order
};

// What an optimizer steps: its parts (disjoint in `local`, in any order: it steps them in `local`
// order) and the length of its compact state buffers (the parts and the padding between them).
struct OptimShard {
  std::vector<OptimPart> parts;
  int64_t length = 0;
  int rank = 0, world = 1;
  // Every trained tensor of the model (not only those held here), for whole-tensor work; empty:
  // one rank holding every part it steps whole.
  std::vector<OptimTensorRanks> tensors;
};

// The parts of every tensor inside the flat range [begin, end), compact from `begin` (state,
// master and gradients alike), each in its group: one rank's view without sharding.
OptimShard optim_shard_of_range(const ParamTable& table, const OptimConfig& config, int64_t begin,
                                int64_t end);

// One component of optimizer state, for the memory ledger.
struct StateComponent {
  std::string name;  // "m", "v", "momentum", "codes.m", "absmax.m", "row", "col", ...
  DType dtype = DType::kF32;
  int64_t elements = 0;
  int64_t bytes = 0;
  MemTag tag = MemTag::kOptimM;
  bool host = false;  // in host memory beside the backend's (allocate_host_state)
  // The optimizer groups the bytes serve (the ledger's `group`): "all", or e.g. "matrix" for
  // Muon's momentum and "embedding,nodecay" for its AdamW moments.
  std::string group = "all";
  // Scratch of the step (Muon's exchange and Newton–Schulz buffers): allocated for the run, not
  // state (nothing in it survives a step; never checkpointed).
  bool scratch = false;
};

// A named view of one piece of state of one parameter, for checkpoints. `param` is the index in
// the parameter table (-1 for optimizer-wide state). For states that mirror the parameter
// (m, v, codes, momentum) `param_begin` is the first element of the tensor held here and
// `numel` how many; factored/per-tensor states hold the whole thing (param_begin = 0).
struct StateView {
  std::string name;  // e.g. "m"
  int param = -1;
  DType dtype = DType::kF32;
  void* data = nullptr;
  int64_t param_begin = 0;
  int64_t numel = 0;
  std::vector<int64_t> shape;  // logical shape of the full state tensor
  // False for per-tensor state that every rank holding a part of the tensor keeps whole (the
  // same values everywhere): only the rank holding the tensor's first element writes it.
  bool write = true;
  // Held in host memory (small statistics host code combines), not in the backend's.
  bool host = false;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual std::string name() const = 0;
  virtual const OptimConfig& config() const = 0;
  // Allocates (zeroed) state for `shard` through backend.allocate.
  virtual void init(const ParamTable& table, const OptimShard& shard, Backend& backend) = 0;
  // The single flat range [begin, end) (optim_shard_of_range).
  void init(const ParamTable& table, int64_t begin, int64_t end, Backend& backend);
  // master: fp32, grads: fp32/bf16/fp16, addressed as init's parts say.
  virtual void step(float* master, Tensor grads, const OptimStepInfo& info) = 0;
  virtual std::vector<StateComponent> state_components() const = 0;
  virtual std::vector<StateView> state_views() = 0;
  // Optimizer state bytes per parameter this optimizer keeps (excluding master), for the planner.
  virtual double state_bytes_per_param() const = 0;
  // True when step() writes the compute copy itself (OptimStepInfo::compute) with weights other
  // than the master's: the trainer then neither rounds the master into it after a step nor
  // shares a buffer between them (Schedule-Free AdamW).
  virtual bool writes_compute_copy() const { return false; }
  // Writes the weights it trains at into the compute copy (after a load, or after an
  // evaluation put the master's weights there); only optimizers that writes_compute_copy() act.
  virtual void write_training_weights(float* master, Tensor compute) {
    (void)master;
    (void)compute;
  }
  // True once evaluation and the run's result use an average of the iterates instead of the
  // master (optim.ema_half_life, after its first step): the same on every rank.
  virtual bool has_average() const { return false; }
  // That average, fp32 in the master's layout over this rank's parts (nullptr without one, or
  // when this rank holds no parts).
  virtual const float* averaged_weights() const { return nullptr; }
};

// Creates the optimizer named by config.name; throws Error naming optim.name otherwise.
std::unique_ptr<Optimizer> optimizer_create(const OptimConfig& config);

}  // namespace ledgerlm
