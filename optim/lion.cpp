// Lion (Chen et al. 2023): one momentum, the update the sign of its interpolation with the
// gradient (optim_kernels_lion.h). 4 bytes of fp32 state per parameter (2 with precision.state =
// bf16). Every group: LR x its multiplier, its weight decay; Lion's LR and decay live on their own
// scale (README, Optimizers).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class LionOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "lion"; }
  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    ops_.clear();
    for (const auto& seg : segs_) {
      OptimOp op = segment_op(OptimOpKind::kLion, seg, master, grads, info.grad_scale);
      op.s1 = state_at(m_, seg.local, state_dtype());
      op.lion = lion_step_make<float>(info.lr * seg.lr_mult, config_.lion_beta1, config_.lion_beta2,
                                      seg.weight_decay);
      ops_.push_back(op);
    }
    backend_->optimizer_ops(ops_.data(), static_cast<int64_t>(ops_.size()));
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (const auto& seg : segs_) views.push_back(mirror_view("m", seg, m_));
    return views;
  }

 protected:
  void on_init() override { m_ = allocate_state("m", MemTag::kOptimM, state_dtype(), length_); }

 private:
  Buffer m_;
  std::vector<OptimOp> ops_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_lion(const OptimConfig& config) {
  return std::make_unique<LionOptimizer>(config);
}

std::vector<std::string> lion_notes(const OptimConfig& c) {
  // Lion moves every weight by exactly lr per step: AdamW's LR is 3-10x too large for it.
  if (c.lr < 3e-4) return {};
  char line[256];
  std::snprintf(line, sizeof line,
                "optim.lr = %g is on AdamW's scale; Lion usually wants a 3-10x smaller LR "
                "and a 3-10x larger optim.weight_decay (README, Optimizers)",
                c.lr);
  return {line};
}

}  // namespace ledgerlm
