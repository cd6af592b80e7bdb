// LAMB (arXiv 1904.00962): Adam moments, update r = m_hat/(sqrt(v_hat)+eps) + wd*w scaled per
// tensor by the trust ratio phi(||w||)/||r||. Norms come from partial sums over this rank's slice
// of each tensor, reduced across ranks in one batched call, so sharding does not change them.
// m and v are stored as OptimConfig::state_dtype (fp32 or bf16), updated in fp32.
#include <memory>

#include "model/backend/optim/optim_kernels_trust.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class LambOptimizer : public MomentsOptimizer {
 public:
  using MomentsOptimizer::MomentsOptimizer;
  std::string name() const override { return "lamb"; }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    const bool clamp = config_.lamb_phi == "clamp";
    std::vector<OptimOp> ops;
    // Indexed by table position, not by segment: every rank must reduce the same layout.
    std::vector<double> sums(2 * table_.params.size());
    for (const OptimSegment& seg : segs_) {
      OptimOp op = segment_op(OptimOpKind::kLambMoments, seg, master, grads, info.grad_scale);
      op.s1 = state_at(m_, seg.local, state_dtype());
      op.s2 = state_at(v_, seg.local, state_dtype());
      op.lamb = lamb_step_make<float>(config_.beta1, config_.beta2, config_.eps, seg.weight_decay,
                                      info.step);
      const auto s = run(op);
      sums[2 * seg.param] = s[0];
      sums[2 * seg.param + 1] = s[1];
      ops.push_back(op);
    }
    optim_reduce(info, sums);
    for (size_t k = 0; k < segs_.size(); ++k) {
      const size_t p = static_cast<size_t>(segs_[k].param);
      const double trust = lamb_trust_ratio(std::sqrt(sums[2 * p]), std::sqrt(sums[2 * p + 1]),
                                            clamp, config_.trust_lo, config_.trust_hi);
      OptimOp& op = ops[k];
      op.kind = OptimOpKind::kLambApply;
      op.scale = static_cast<float>(info.lr * segs_[k].lr_mult * trust);
      run(op);
    }
  }
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_lamb(const OptimConfig& config) {
  return std::make_unique<LambOptimizer>(config);
}

}  // namespace ledgerlm
