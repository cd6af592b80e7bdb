// AdamW (torch.optim.AdamW semantics: decoupled weight decay, bias-corrected moments) in three
// schedules of the same arithmetic: loop (each stage over one tensor at a time), foreach (each
// stage over all tensors), fused (one parallel pass doing the whole update). Same state layout.
// m and v are stored as OptimConfig::state_dtype (fp32 or bf16), always updated in fp32.
#include <memory>

#include "optim/kernels.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class AdamWOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "adamw"; }
  double state_bytes_per_param() const override { return 2.0 * state_elem_bytes(); }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    std::vector<AdamWStep<float>> steps;
    for (const auto& seg : segs_)
      steps.push_back(adamw_step_make<float>(info.lr * seg.lr_mult, config_.beta1, config_.beta2,
                                             config_.eps, seg.weight_decay, info.step));
    optim_with_state(m_.data(), state_dtype(), [&](auto* m) {
      auto* v = static_cast<decltype(m)>(v_.data());
      optim_with_grad_view(grads, info.grad_scale, [&](auto g) { run(master, m, v, g, steps); });
    });
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (const auto& seg : segs_) {
      views.push_back(mirror_view("m", seg, m_));
      views.push_back(mirror_view("v", seg, v_));
    }
    return views;
  }

 protected:
  void on_init() override {
    m_ = allocate_state("m", MemTag::kOptimM, state_dtype(), length_);
    v_ = allocate_state("v", MemTag::kOptimV, state_dtype(), length_);
  }

 private:
  // One step in the configured schedule; S is the state storage (float or StateBF16).
  template <class S, class G>
  void run(float* master, S* m, S* v, const G& g, const std::vector<AdamWStep<float>>& steps) {
    const size_t n = segs_.size();
    auto run_decay = [&](size_t k) {
      adamw_stage_decay(master + segs_[k].master_at, segs_[k].count, steps[k]);
    };
    auto run_moments = [&](size_t k) {
      const int64_t o = segs_[k].local, go = segs_[k].grad_at;
      adamw_stage_moments(m + o, v + o, g.shifted(go), segs_[k].count, steps[k]);
    };
    auto run_param = [&](size_t k) {
      const int64_t o = segs_[k].local, wo = segs_[k].master_at;
      adamw_stage_param(master + wo, m + o, v + o, segs_[k].count, steps[k]);
    };
    if (config_.impl == "fused") {
      for (size_t k = 0; k < n; ++k) {
        const int64_t o = segs_[k].local, wo = segs_[k].master_at, go = segs_[k].grad_at;
        adamw_update(master + wo, m + o, v + o, g.shifted(go), segs_[k].count, steps[k]);
      }
    } else if (config_.impl == "loop") {
      for (size_t k = 0; k < n; ++k) {
        run_decay(k);
        run_moments(k);
        run_param(k);
      }
    } else {  // foreach
      for (size_t k = 0; k < n; ++k) run_decay(k);
      for (size_t k = 0; k < n; ++k) run_moments(k);
      for (size_t k = 0; k < n; ++k) run_param(k);
    }
  }

  Buffer m_, v_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_adamw(const OptimConfig& config) {
  return std::make_unique<AdamWOptimizer>(config);
}

}  // namespace ledgerlm
