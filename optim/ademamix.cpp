// AdEMAMix (Pagliardini et al. 2024): Adam's moments plus a slow EMA of the gradients mixed into
// the numerator (optim_kernels_ademamix.h). 12 bytes of fp32 state per parameter: m1, nu, m2.
// alpha and beta3 warm up over T steps as in the authors' code: alpha linearly from 0, beta3 so
// that the EMA's half-life grows linearly from beta1's to beta3's. T is optim.ademamix_warmup, or
// the run's length in steps when that is 0; the T a run started with is kept in its checkpoints,
// and a resume that would change it is refused (the schedule would jump).
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "model/base/check.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

// Half-life (in steps, minus one) of an EMA with decay beta, and back.
double half_life(double beta) {
  return std::log(0.5) / std::log(beta + 1e-8) - 1.0;
}
double beta_of_half_life(double t) {
  return std::pow(0.5, 1.0 / (t + 1.0));
}

class AdEMAMixOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "ademamix"; }
  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    const double warmup = warmup_steps(info);
    const double t = static_cast<double>(info.step);
    double alpha = config_.ademamix_alpha, beta3 = config_.ademamix_beta3;
    if (t < warmup) {
      const double a = t / warmup;
      alpha = a * config_.ademamix_alpha;
      beta3 = beta_of_half_life((1.0 - a) * half_life(config_.beta1) +
                                a * half_life(config_.ademamix_beta3));
    }
    ops_.clear();
    for (const auto& seg : segs_) {
      OptimOp op = segment_op(OptimOpKind::kAdEMAMix, seg, master, grads, info.grad_scale);
      op.s1 = state_at(m1_, seg.local, state_dtype());
      op.s2 = state_at(nu_, seg.local, state_dtype());
      op.s3 = state_at(m2_, seg.local, state_dtype());
      AdEMAMixStep<float>& s = op.ademamix;
      s.beta1 = static_cast<float>(config_.beta1);
      s.one_minus_beta1 = static_cast<float>(1.0 - config_.beta1);
      s.beta2 = static_cast<float>(config_.beta2);
      s.one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
      s.beta3 = static_cast<float>(beta3);
      s.one_minus_beta3 = static_cast<float>(1.0 - beta3);
      s.bc1 = static_cast<float>(1.0 - std::pow(config_.beta1, t));
      s.bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(config_.beta2, t)));
      s.alpha = static_cast<float>(alpha);
      s.eps = static_cast<float>(config_.eps);
      s.wd = static_cast<float>(seg.weight_decay);
      s.lr = static_cast<float>(info.lr * seg.lr_mult);
      ops_.push_back(op);
    }
    backend_->optimizer_ops(ops_.data(), static_cast<int64_t>(ops_.size()));
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (const auto& seg : segs_) {
      views.push_back(mirror_view("m1", seg, m1_));
      views.push_back(mirror_view("nu", seg, nu_));
      views.push_back(mirror_view("m2", seg, m2_));
    }
    views.push_back(scalar_view("ademamix_warmup", warmup_, 1));
    return views;
  }

 protected:
  void on_init() override {
    m1_ = allocate_state("m1", MemTag::kOptimM, state_dtype(), length_);
    nu_ = allocate_state("nu", MemTag::kOptimV, state_dtype(), length_);
    m2_ = allocate_state("m2", MemTag::kOptimM, state_dtype(), length_);
    warmup_ = allocate_host_state("scalars", MemTag::kOptimFactored, DType::kF64, 1);
  }

 private:
  // T: the key, or the run's length; recorded at the first step, checked at every later one.
  double warmup_steps(const OptimStepInfo& info) {
    const int64_t want = config_.ademamix_warmup > 0 ? config_.ademamix_warmup : info.total_steps;
    LLM_REQUIRE(want > 0,
                "optim.ademamix_warmup: the run's length in steps is unknown; set the alpha and "
                "beta3 warmup steps explicitly");
    double* recorded = warmup_.as<double>();
    if (*recorded == 0.0) *recorded = static_cast<double>(want);
    LLM_REQUIRE(
        *recorded == static_cast<double>(want),
        "optim.ademamix_warmup: this run warms "
        "alpha and beta3 up over ",
        want, " steps, but it began with ", static_cast<int64_t>(*recorded),
        " (a changed run length would make the schedule jump); set optim.ademamix_warmup = ",
        static_cast<int64_t>(*recorded), " to continue it");
    return *recorded;
  }

  Buffer m1_, nu_, m2_, warmup_;
  std::vector<OptimOp> ops_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_ademamix(const OptimConfig& config) {
  return std::make_unique<AdEMAMixOptimizer>(config);
}

void ademamix_validate(const OptimConfig& c) {
  // beta3 warms up through the EMAs' half-lives, log(0.5) / log(beta + 1e-8) (the authors'
  // formula): a beta within 1e-8 of 1 gives a negative half-life and a warmup beta3 above 1,
  // which makes the slow EMA subtract the gradients it should add.
  LLM_REQUIRE(c.beta1 + 1e-8 < 1.0,
              "optim.beta1: ademamix needs it below 1 - 1e-8 (its beta3 "
              "warmup takes log(beta1 + 1e-8)) (got ",
              c.beta1, ")");
  LLM_REQUIRE(c.ademamix_beta3 + 1e-8 < 1.0,
              "optim.ademamix_beta3: expected below 1 - 1e-8 (its "
              "warmup takes log(beta3 + 1e-8)) (got ",
              c.ademamix_beta3, ")");
}

std::vector<std::string> ademamix_notes(const OptimConfig& c) {
  // AdEMAMix inherits AdamW's beta2 = 0.95; with it nu forgets within ~20 steps while the slow
  // EMA m2 remembers, so alpha * m2 / sqrt(nu) runs away where gradients shrink (rare tokens'
  // embedding rows): losses of ~1e3 late in a run. The authors use 0.999 (docs/optimizers.md).
  if (c.beta2 >= 0.99) return {};
  char line[256];
  std::snprintf(line, sizeof line,
                "optim.beta2 = %g with ademamix: its slow EMA can outgrow nu and blow the run up "
                "late; the authors use 0.999 (docs/optimizers.md, ademamix)",
                c.beta2);
  return {line};
}

}  // namespace ledgerlm
