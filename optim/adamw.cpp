// AdamW (torch.optim.AdamW semantics: decoupled weight decay, bias-corrected moments) in three
// schedules of the same arithmetic: loop (each stage over one tensor at a time), foreach (each
// stage over all tensors), fused (one parallel pass doing the whole update). Same state layout.
// m and v are stored as OptimConfig::state_dtype (fp32 or bf16), always updated in fp32.
#include <memory>

#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class AdamWOptimizer : public MomentsOptimizer {
 public:
  using MomentsOptimizer::MomentsOptimizer;
  std::string name() const override { return "adamw"; }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    std::vector<OptimOp> ops;
    for (const auto& seg : segs_) {
      OptimOp op = segment_op(OptimOpKind::kAdamWFused, seg, master, grads, info.grad_scale);
      op.s1 = state_at(m_, seg.local, state_dtype());
      op.s2 = state_at(v_, seg.local, state_dtype());
      op.adamw = adamw_step_make<float>(info.lr * seg.lr_mult, config_.beta1, config_.beta2,
                                        config_.eps, seg.weight_decay, info.step);
      ops.push_back(op);
    }
    // The same stages in three schedules (bit-identical): one fused pass per tensor; the stages
    // of one tensor in turn (loop); each stage over every tensor (foreach).
    const OptimOpKind stages[] = {OptimOpKind::kAdamWDecay, OptimOpKind::kAdamWMoments,
                                  OptimOpKind::kAdamWParam};
    run_scheduled(ops, stages);
  }
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_adamw(const OptimConfig& config) {
  return std::make_unique<AdamWOptimizer>(config);
}

}  // namespace ledgerlm
