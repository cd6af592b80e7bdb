// SGD with optional momentum / Nesterov and l2 or decoupled weight decay (torch.optim.SGD
// semantics, dampening 0), in three schedules of the same arithmetic: loop (each stage over one
// tensor at a time), foreach (each stage over all tensors), fused (one pass doing everything).
// The momentum buffer is stored as OptimConfig::state_dtype (fp32 or bf16), updated in fp32.
#include <memory>

#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class SgdOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "sgd"; }
  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    std::vector<OptimOp> ops;
    for (const auto& seg : segs_) {
      OptimOp op = segment_op(OptimOpKind::kSgdFused, seg, master, grads, info.grad_scale);
      op.s1 = state_at(buf_, seg.local, state_dtype());  // empty without momentum
      op.sgd = make_step(seg, info.lr);
      ops.push_back(op);
    }
    // The same stages in three schedules (bit-identical): fused, loop, foreach.
    const OptimOpKind stages[] = {OptimOpKind::kSgdDecay, OptimOpKind::kSgdBuf,
                                  OptimOpKind::kSgdParam};
    run_scheduled(ops, stages);
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    if (buf_.empty()) return views;
    for (const auto& seg : segs_) views.push_back(mirror_view("momentum", seg, buf_));
    return views;
  }

 protected:
  void on_init() override {
    if (config_.momentum > 0.0)
      buf_ = allocate_state("momentum", MemTag::kOptimMomentum, state_dtype(), length_);
  }

 private:
  SgdStep<float> make_step(const OptimSegment& seg, double base_lr) const {
    const double lr = base_lr * seg.lr_mult, wd = seg.weight_decay;
    SgdStep<float> s;
    s.lr = static_cast<float>(lr);
    s.momentum = static_cast<float>(config_.momentum);
    s.nesterov = config_.nesterov;
    if (config_.wd_mode == "l2")
      s.l2 = static_cast<float>(wd);
    else
      s.decay = static_cast<float>(1.0 - lr * wd);
    return s;
  }

  Buffer buf_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_sgd(const OptimConfig& config) {
  return std::make_unique<SgdOptimizer>(config);
}

}  // namespace ledgerlm
