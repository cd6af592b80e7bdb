// SGD with optional momentum / Nesterov and l2 or decoupled weight decay (torch.optim.SGD
// semantics, dampening 0), in three schedules of the same arithmetic: loop (each stage over one
// tensor at a time), foreach (each stage over all tensors), fused (one pass doing everything).
// The momentum buffer is stored as OptimConfig::state_dtype (fp32 or bf16), updated in fp32.
#include <memory>

#include "optim/kernels.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class SgdOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "sgd"; }
  double state_bytes_per_param() const override {
    return config_.momentum > 0.0 ? state_elem_bytes() : 0.0;
  }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    std::vector<SgdStep<float>> steps;
    for (const auto& seg : segs_) steps.push_back(make_step(seg, info.lr));
    optim_with_grad_view(grads, info.grad_scale, [&](auto g) {
      if (config_.momentum > 0.0)
        optim_with_state(buf_.data(), state_dtype(),
                         [&](auto* buf) { run(master, buf, g, steps); });
      else
        run(master, static_cast<float*>(nullptr), g, steps);
    });
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
  // One step in the configured schedule; `buf` (float or StateBF16) is null without momentum.
  template <class S, class G>
  void run(float* master, S* buf, const G& g, const std::vector<SgdStep<float>>& steps) {
    auto w_of = [&](size_t k) { return master + segs_[k].master_at; };
    auto b_of = [&](size_t k) { return buf ? buf + segs_[k].local : static_cast<S*>(nullptr); };
    auto g_of = [&](size_t k) { return g.shifted(segs_[k].grad_at); };
    const size_t n = segs_.size();
    if (config_.impl == "fused") {
      for (size_t k = 0; k < n; ++k)
        sgd_update(w_of(k), b_of(k), g_of(k), segs_[k].count, steps[k]);
    } else if (config_.impl == "loop") {
      for (size_t k = 0; k < n; ++k) {
        sgd_stage_decay(w_of(k), segs_[k].count, steps[k]);
        sgd_stage_buf(w_of(k), b_of(k), g_of(k), segs_[k].count, steps[k]);
        sgd_stage_param(w_of(k), b_of(k), g_of(k), segs_[k].count, steps[k]);
      }
    } else {  // foreach
      for (size_t k = 0; k < n; ++k) sgd_stage_decay(w_of(k), segs_[k].count, steps[k]);
      for (size_t k = 0; k < n; ++k)
        sgd_stage_buf(w_of(k), b_of(k), g_of(k), segs_[k].count, steps[k]);
      for (size_t k = 0; k < n; ++k)
        sgd_stage_param(w_of(k), b_of(k), g_of(k), segs_[k].count, steps[k]);
    }
  }

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
