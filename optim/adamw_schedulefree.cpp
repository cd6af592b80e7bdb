// Schedule-Free AdamW (Defazio et al. 2024; the authors' AdamWScheduleFree): no LR schedule after
// warmup; the weights it returns are an lr_max^2-weighted average x of the iterates z, and
// gradients are taken at the interpolation y = (1-beta1)*z + beta1*x
// (optim_kernels_schedulefree.h). Where each lives:
//   x  the fp32 master (evaluation, model.safetensors, checkpoints' model tensors, export);
//   z, v  state (8 bytes per parameter in fp32);
//   y  the compute copy, written by every step (so fp32 runs keep a compute copy apart from the
//      master: +4 bytes per parameter, the ledger's master row).
// The warmup is optim.warmup_steps through the trainer's constant schedule, which scales the LR by
// step/warmup exactly as the authors' code does; other schedules are refused
// (schedulefree_validate). Optimizer-wide scalars — steps taken k, lr_max and the weights' sum —
// are checkpointed as "optim.schedulefree" on rank 0; z starts as the initial weights (copied at
// the first step).
#include <algorithm>
#include <cmath>
#include <memory>

#include "model/base/check.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class ScheduleFreeOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "adamw_schedulefree"; }
  bool writes_compute_copy() const override { return true; }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    double* k = scalars_.as<double>();  // k, lr_max, weight_sum
    if (k[0] == 0.0) start_z(master);
    const double lr = info.lr;
    k[1] = std::max(k[1], lr);
    const double weight = std::pow(k[1], config_.sf_weight_lr_power);
    k[2] += weight;
    const double ckp1 = k[2] != 0.0 ? weight / k[2] : 0.0;
    const double bc2 = 1.0 - std::pow(config_.beta2, k[0] + 1.0);
    ops_.clear();
    for (const auto& seg : segs_) {
      OptimOp op = segment_op(OptimOpKind::kScheduleFree, seg, master, grads, info.grad_scale);
      op.s1 = state_at(z_, seg.local, state_dtype());
      op.s2 = state_at(v_, seg.local, state_dtype());
      op.out = info.compute.offset(seg.compute_at);
      op.schedulefree = make_step(lr * seg.lr_mult, ckp1, bc2, seg.weight_decay);
      ops_.push_back(op);
    }
    backend_->optimizer_ops(ops_.data(), static_cast<int64_t>(ops_.size()));
    k[0] += 1.0;
  }

  void write_training_weights(float* master, Tensor compute) override {
    require_initialized();
    if (scalars_.as<double>()[0] == 0.0) start_z(master);
    ops_.clear();
    for (const auto& seg : segs_) {
      OptimOp op;
      op.kind = OptimOpKind::kScheduleFreeY;
      op.w = Tensor(master + seg.master_at, DType::kF32);
      op.s1 = state_at(z_, seg.local, state_dtype());
      op.out = compute.offset(seg.compute_at);
      op.n = seg.count;
      op.schedulefree = make_step(0.0, 0.0, 1.0, 0.0);
      ops_.push_back(op);
    }
    backend_->optimizer_ops(ops_.data(), static_cast<int64_t>(ops_.size()));
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (const auto& seg : segs_) {
      views.push_back(mirror_view("z", seg, z_));
      views.push_back(mirror_view("v", seg, v_));
    }
    views.push_back(scalar_view("schedulefree", scalars_, 3));
    return views;
  }

 protected:
  void on_init() override {
    z_ = allocate_state("z", MemTag::kOptimZ, state_dtype(), length_);
    v_ = allocate_state("v", MemTag::kOptimV, state_dtype(), length_);
    scalars_ = allocate_host_state("scalars", MemTag::kOptimFactored, DType::kF64, 3);
    scalars_.as<double>()[1] = -1.0;  // lr_max before the first step
  }

 private:
  ScheduleFreeStep<float> make_step(double lr, double ckp1, double bc2, double wd) const {
    ScheduleFreeStep<float> s;
    s.lr = static_cast<float>(lr);
    s.ckp1 = static_cast<float>(ckp1);
    s.beta1 = static_cast<float>(config_.beta1);
    s.one_minus_beta1 = static_cast<float>(1.0 - config_.beta1);
    s.beta2 = static_cast<float>(config_.beta2);
    s.one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
    s.bc2 = static_cast<float>(bc2);
    s.eps = static_cast<float>(config_.eps);
    s.wd = static_cast<float>(wd);
    return s;
  }

  // z0 = x0: the iterates start at the initial weights.
  void start_z(float* master) {
    for (const auto& seg : segs_)
      backend_->convert(state_at(z_, seg.local, state_dtype()),
                        Tensor(master + seg.master_at, DType::kF32), seg.count);
  }

  Buffer z_, v_, scalars_;
  std::vector<OptimOp> ops_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_create_schedulefree(const OptimConfig& config) {
  return std::make_unique<ScheduleFreeOptimizer>(config);
}

void schedulefree_validate(const OptimConfig& c) {
  // The underflow optim_config.cpp bounds the power for, at this LR: the peak LR's weight must be
  // a normal double, or every iterate's weight is 0 (or inf) and the averaged weights never move.
  LLM_REQUIRE(c.lr == 0.0 || std::isnormal(std::pow(c.lr, c.sf_weight_lr_power)),
              "optim.sf_weight_lr_power = ", c.sf_weight_lr_power, " with optim.lr = ", c.lr,
              ": lr^power is not a normal double, so the averaged weights would never move; "
              "lower the power (the authors use 2)");
  LLM_REQUIRE(c.schedule == "constant", "optim.schedule = ", c.schedule,
              ": adamw_schedulefree replaces the LR schedule (it averages its iterates instead); "
              "set optim.schedule = constant (optim.warmup_steps stays its warmup)");
}

}  // namespace ledgerlm
