// Shared machinery of the optimizers: the per-tensor segments of a range of the flat layout
// (with their parameter-group hyper-parameters), state allocation, the batched reduce of
// per-tensor partial sums, and state views that mirror the parameter layout.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <array>

#include "model/backend/optim/optim_op.h"
#include "optim/optimizer.h"

namespace ledgerlm {

// The part of one parameter tensor an optimizer updates (an OptimPart with what the kernels need).
struct OptimSegment {
  int param = -1;           // index into the ParamTable
  int64_t local = 0;        // first element in the compact state buffers (ranges end to end)
  int64_t master_at = 0;    // first element in the master buffer
  int64_t grad_at = 0;      // first element in the gradient buffer
  int64_t compute_at = 0;   // first element in the compute copy (OptimStepInfo::compute)
  int64_t count = 0;        // elements held here
  int64_t param_begin = 0;  // first element held here, relative to the tensor's start
  int64_t numel = 0;        // the whole tensor's element count
  // Elements that are real parameters: the token embedding's rows past the vocabulary (padding
  // to a multiple of 64) are zero weights with zero gradients. Per-tensor statistics that divide
  // by a size (Adafactor's RMS) count only real elements.
  int64_t real_numel = 0;
  int64_t real_count = 0;      // of this segment's `count` elements, the real ones (a prefix)
  int64_t rows = 1, cols = 1;  // 2-D view: cols = last dim, rows = the rest (vectors: 1 x n)
  int dims = 1;
  int split = 1;  // independent matrices stacked along the rows (ParamInfo::split)
  int group = 0;  // optimizer group (optim_groups.h)
  ParamKind kind = ParamKind::kMatrix;
  double lr_mult = 1.0;       // per-group LR multiplier
  double weight_decay = 0.0;  // 0 where the group is not decayed
};

// The segments of the shard's parts in `local` order, with their group's LR multiplier and
// weight decay (optim_groups.h); padding elements belong to no segment.
std::vector<OptimSegment> optim_segments_build(const ParamTable& table, const OptimShard& shard,
                                               const OptimConfig& config);

// Adds per-tensor partial sums across ranks: one call with everything batched.
void optim_reduce(const OptimStepInfo& info, std::vector<double>& values);

// Base of all optimizers: holds the config, range, segments and allocated buffers.
class RangeOptimizer : public Optimizer {
 public:
  explicit RangeOptimizer(const OptimConfig& config);
  using Optimizer::init;
  void init(const ParamTable& table, const OptimShard& shard, Backend& backend) override;
  const OptimConfig& config() const override { return config_; }
  std::vector<StateComponent> state_components() const override { return components_; }
  // The nominal figure of the optimizer's traits (optim_state_bytes_per_param).
  double state_bytes_per_param() const override;

 protected:
  // Called by init after the segments are built: allocate state here.
  virtual void on_init() = 0;
  // A zeroed buffer of `elements` x dtype, recorded as a state component.
  Buffer allocate_state(const std::string& name, MemTag tag, DType dtype, int64_t elements,
                        const std::string& group = "all", bool scratch = false);
  // The same in host memory (still counted by the backend's tracker): for small per-tensor
  // statistics that host code combines between the backend's passes.
  Buffer allocate_host_state(const std::string& name, MemTag tag, DType dtype, int64_t elements);
  // Optimizer-wide host scalars (step counters, running maxima) checkpointed as "optim.<name>":
  // a view written by rank 0 only (every rank holds the same values).
  StateView scalar_view(const std::string& name, const Buffer& buf, int64_t count) const;
  // A view of a state that mirrors the parameter layout (element i <-> master[i]), of the given
  // dtype; `offset` is the segment's first element in `buf` (seg.local for mirrored buffers).
  StateView mirror_view(const std::string& name, const OptimSegment& seg, const Buffer& buf,
                        DType dtype, int64_t offset) const;
  StateView mirror_view(const std::string& name, const OptimSegment& seg, const Buffer& buf) const {
    return mirror_view(name, seg, buf, state_dtype(), seg.local);
  }
  // A backend optimizer kernel over segment `seg`: weights and gradients at the segment's
  // addresses, n = seg.count; the caller adds states and step constants.
  OptimOp segment_op(OptimOpKind kind, const OptimSegment& seg, float* master, Tensor grads,
                     double grad_scale) const;
  // Element `local` of a state buffer of `dtype` as a tensor (empty buffer: empty tensor).
  static Tensor state_at(const Buffer& buf, int64_t local, DType dtype);
  // Runs the op on the backend; returns its sums (kinds that reduce).
  std::array<double, 2> run(const OptimOp& op) const;
  // Runs `fused` (one op per segment, each doing every stage) on the schedule config_.impl
  // names, with the same arithmetic in each: "fused" runs them as they are; "loop" runs each
  // segment's `stages` in turn; "foreach" runs each stage over every segment before the next.
  // For optimizers whose stages reduce nothing (SGD, AdamW).
  void run_scheduled(const std::vector<OptimOp>& fused, std::span<const OptimOpKind> stages) const;

  // Storage dtype of parameter-shaped state (OptimConfig::state_dtype) and its element size.
  DType state_dtype() const { return config_.state_dtype; }
  double state_elem_bytes() const { return static_cast<double>(dtype_size(config_.state_dtype)); }
  void require_initialized() const;
  // Bytes of the allocated state components (scratch left out) per parameter element held (after
  // init).
  double allocated_bytes_per_param() const;

  OptimConfig config_;
  ParamTable table_;
  int64_t length_ = 0;  // elements of the compact buffers
  OptimShard shard_;    // what init() was given (ranks, whole-tensor owners)
  Backend* backend_ = nullptr;
  std::vector<OptimSegment> segs_;
  std::vector<StateComponent> components_;
  // run_scheduled's foreach pass, kept so that a step allocates nothing once it has run.
  mutable std::vector<OptimOp> pass_;
};

// An optimizer with Adam's two moments, m and v, mirroring the parameter layout in
// OptimConfig::state_dtype (AdamW, LAMB): their allocation, bytes and state views.
class MomentsOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::vector<StateView> state_views() override;

 protected:
  void on_init() override;
  Buffer m_, v_;
};

}  // namespace ledgerlm
