// LARS (arXiv 1708.03888): momentum SGD whose step is scaled per tensor by the local LR
// eta*||w|| / (||g|| + wd*||w||). Norms come from partial sums over this rank's slice, reduced
// across ranks in one batched call. 1-D tensors (biases, norm weights) can be excluded from the
// trust ratio (local LR 1), as is common practice. The momentum buffer is stored as
// OptimConfig::state_dtype (fp32 or bf16), updated in fp32.
#include <memory>

#include "model/backend/optim/optim_kernels_trust.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class LarsOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "lars"; }
  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    // Indexed by table position, not by segment: every rank must reduce the same layout.
    std::vector<double> sums(2 * table_.params.size());
    for (const OptimSegment& seg : segs_) {
      if (!uses_trust(seg)) continue;
      const auto s = run(segment_op(OptimOpKind::kLarsNorms, seg, master, grads, info.grad_scale));
      sums[2 * seg.param] = s[0];
      sums[2 * seg.param + 1] = s[1];
    }
    optim_reduce(info, sums);
    for (const OptimSegment& seg : segs_) {
      const size_t p = static_cast<size_t>(seg.param);
      const double local = uses_trust(seg)
                               ? lars_local_lr(std::sqrt(sums[2 * p]), std::sqrt(sums[2 * p + 1]),
                                               config_.lars_eta, seg.weight_decay)
                               : 1.0;
      OptimOp op = segment_op(OptimOpKind::kLarsApply, seg, master, grads, info.grad_scale);
      op.s1 = state_at(buf_, seg.local, state_dtype());
      op.lars = LarsStep<float>{static_cast<float>(config_.momentum),
                                static_cast<float>(seg.weight_decay),
                                static_cast<float>(info.lr * seg.lr_mult * local)};
      run(op);
    }
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (const auto& seg : segs_) views.push_back(mirror_view("momentum", seg, buf_));
    return views;
  }

 protected:
  void on_init() override {
    buf_ = allocate_state("momentum", MemTag::kOptimMomentum, state_dtype(), length_);
  }

 private:
  bool uses_trust(const OptimSegment& seg) const {
    return !(config_.lars_exclude_1d && seg.dims <= 1);
  }
  Buffer buf_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_lars(const OptimConfig& config) {
  return std::make_unique<LarsOptimizer>(config);
}

}  // namespace ledgerlm
