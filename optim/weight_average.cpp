// Weight averaging (optim.ema_half_life): an exponential moving average of the fp32 master
// weights, kept beside any optimizer, that evaluation and the run's weights use instead of the
// master (Polyak-style iterate averaging; Zhang et al. 2024 read critical batch sizes off such an
// average at a constant LR, so that no schedule has to end at each target).
//
// The decay per optimizer step is d = 0.5^(tokens per step / half-life): an update's weight in the
// average halves every half-life tokens, whatever the global batch. The average is debiased, as
// Adam's moments are: after t applied steps it is the d-weighted mean of the iterates w_1..w_t,
//   e_t = e_{t-1} + c_t (w_t - e_{t-1}),   c_t = (1 - d) / (1 - d^t)   (c_1 = 1: e_1 = w_1),
// so the initial weights never enter it. Steps that were skipped (fp16 overflow) do not count.
// On the backend it is three passes over the held elements, e = c ((1 - c) / c e + w), with the
// backend's scale and accumulate (the same arithmetic on every backend and sharding).
//
// Where it lives: a state buffer mirroring the parameters ("ema", fp32, 4 bytes per parameter,
// sharded like the master under ZeRO and checkpointed as optimizer state) and one host scalar,
// the steps averaged ("optim.ema_steps"). The inner optimizer is untouched: the training weights
// and the master follow exactly the run without averaging.
#include <cmath>
#include <memory>
#include <utility>

#include "model/base/check.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class WeightAverage : public RangeOptimizer {
 public:
  WeightAverage(std::unique_ptr<Optimizer> inner, const OptimConfig& config)
      : RangeOptimizer(config), inner_(std::move(inner)) {}

  std::string name() const override { return inner_->name(); }

  using RangeOptimizer::init;
  void init(const ParamTable& table, const OptimShard& shard, Backend& backend) override {
    inner_->init(table, shard, backend);
    RangeOptimizer::init(table, shard, backend);
  }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    inner_->step(master, grads, info);
    double* t = steps_.as<double>();
    t[0] += 1.0;
    const double d = config_.ema_decay;
    const double c = (1.0 - d) / (1.0 - std::pow(d, t[0]));
    const double keep = (1.0 - c) / c;  // 0 at the first step: the average starts at w_1
    for (const auto& seg : segs_) {
      const Tensor e = state_at(ema_, seg.local, DType::kF32);
      backend_->scale(e, seg.count, keep);
      backend_->accumulate(e, Tensor(master + seg.master_at, DType::kF32), seg.count);
      backend_->scale(e, seg.count, c);
    }
  }

  std::vector<StateComponent> state_components() const override {
    std::vector<StateComponent> all = inner_->state_components();
    const std::vector<StateComponent> mine = RangeOptimizer::state_components();
    all.insert(all.end(), mine.begin(), mine.end());
    return all;
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views = inner_->state_views();
    for (const auto& seg : segs_)
      views.push_back(mirror_view("ema", seg, ema_, DType::kF32, seg.local));
    views.push_back(scalar_view("ema_steps", steps_, 1));
    return views;
  }

  double state_bytes_per_param() const override { return inner_->state_bytes_per_param() + 4.0; }
  bool writes_compute_copy() const override { return inner_->writes_compute_copy(); }
  void write_training_weights(float* master, Tensor compute) override {
    inner_->write_training_weights(master, compute);
  }

  // Before the first step there is nothing averaged: evaluation uses the master.
  bool has_average() const override { return !steps_.empty() && steps_.as<double>()[0] > 0.0; }
  const float* averaged_weights() const override {
    return has_average() && !ema_.empty() ? ema_.as<float>() : nullptr;
  }

 protected:
  void on_init() override {
    LLM_REQUIRE(config_.ema_decay > 0.0 && config_.ema_decay < 1.0,
                "optim.ema_half_life = ", config_.ema_half_life,
                ": its decay per step must lie in (0, 1) (got ", config_.ema_decay,
                "); the half-life must be positive and the run's tokens per step known");
    ema_ = allocate_state("ema", MemTag::kAverage, DType::kF32, length_);
    steps_ = allocate_host_state("ema_steps", MemTag::kOptimFactored, DType::kF64, 1);
  }

 private:
  std::unique_ptr<Optimizer> inner_;
  Buffer ema_, steps_;
};

}  // namespace

std::unique_ptr<Optimizer> optimizer_wrap_weight_average(std::unique_ptr<Optimizer> inner,
                                                         const OptimConfig& config) {
  return std::make_unique<WeightAverage>(std::move(inner), config);
}

double optim_ema_decay(double half_life_tokens, int64_t tokens_per_step) {
  if (half_life_tokens <= 0.0 || tokens_per_step <= 0) return 0.0;
  return std::pow(0.5, static_cast<double>(tokens_per_step) / half_life_tokens);
}

}  // namespace ledgerlm
