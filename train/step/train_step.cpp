// The training step (see train_step.h).
#include "train/step/train_step.h"

#include <chrono>
#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

LoaderBatches::LoaderBatches(const DataLoader& loader) : loader_(loader) {
  const size_t n = static_cast<size_t>(loader.config().micro_batch * loader.config().seq);
  inputs_.resize(n);
  targets_.resize(n);
}

MicroBatch LoaderBatches::micro_batch(int64_t step, int64_t micro) {
  loader_.batch_at(step - 1, micro, inputs_.data(), targets_.data());
  const int64_t first = loader_.slice_windows(step - 1, micro).front();
  return {inputs_.data(), targets_.data(),
          static_cast<uint64_t>(first - (step - 1) * loader_.config().global_windows())};
}

StepResult train_step(ModelState& state, BatchSource& batches, int64_t step, double lr) {
  const RunConfig& cfg = state.config();
  const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len, A = cfg.train.accum;
  GptModel& model = state.model();
  StepResult r;
  r.lr = lr;
  r.loss_scale = state.loss_scale();
  state.zero_grads();
  double loss_sum = 0.0;
  // train.gns: the small batch's mean squared norm, times the loss scale squared, on every
  // train.gns_interval-th step; the other steps train as with gns off.
  const GnsSource gns = step % cfg.train.gns_interval == 0 ? state.gns_source() : GnsSource::kOff;
  double gns_small_sq = 0.0;
  for (int64_t m = 0; m < A; ++m) {
    // Each micro-batch's gradient alone in the gradient buffer (the sum kept aside): with
    // GnsSource::kMicroBatches, gns_take_micro_batch left the buffer zeroed after micro-batch m-1.
    const MicroBatch mb = batches.micro_batch(step, m);
    ForwardOptions fo;
    fo.training = true;
    fo.seed = static_cast<uint64_t>(cfg.train.seed);
    fo.step = static_cast<uint64_t>(step);
    fo.first_sequence = mb.first_sequence;
    auto t0 = Clock::now();
    loss_sum += model.forward(state.units(), mb.inputs, mb.targets, B, T, fo);
    r.forward_ms += ms_since(t0);
    t0 = Clock::now();
    // Each rank's gradient is its share of the global mean: sums over ranks then average.
    model.backward(state.units(), r.loss_scale / static_cast<double>(A * state.world()));
    if (gns == GnsSource::kMicroBatches) {
      // Backward received scale / A: the micro-batch's mean gradient times the scale is A x this.
      gns_small_sq += state.gns_take_micro_batch(m, m == A - 1) * static_cast<double>(A * A);
    }
    r.backward_ms += ms_since(t0);
  }
  if (gns == GnsSource::kMicroBatches) gns_small_sq /= static_cast<double>(A);
  if (gns == GnsSource::kRanks) {
    // Before the reduction each rank holds its local mean gradient times scale / world. (Its
    // pass and scalar all-reduce count in step_ms only, not as the gradients' comm_ms.)
    const double w = static_cast<double>(state.world());
    gns_small_sq = state.gns_local_sum_squares() * w * w;
  }
  r.comm_ms = state.take_backward_comm_ms();  // ZeRO-2/3 reduce-scatter inside backward
  r.backward_ms -= r.comm_ms;
  // Reduction point: gradients meet across ranks (stage 0 all-reduce, stage 1 reduce-scatter).
  r.comm_ms += state.reduce_gradients();
  // The step's loss is the mean over every rank's micro-batches (the same number on each rank).
  double sums[1] = {loss_sum / static_cast<double>(A)};
  if (state.world() > 1) state.comm().all_reduce_sum(sums, 1);
  r.loss = sums[0] / static_cast<double>(state.world());
  if (!std::isfinite(r.loss) && !state.plan().scaler_on)
    fail(error_message("non-finite loss (", r.loss, ") at step ", step,
                       ": training diverged (try a lower optim.lr or precision.params = fp32)"));
  const StepStats st = state.optimizer_step(step, lr);
  r.grad_norm = st.grad_norm;
  r.skipped = st.skipped;
  r.optim_ms = st.optim_ms;
  r.comm_ms += st.comm_ms;
  r.exchange_bytes = st.exchange_bytes;
  if (gns != GnsSource::kOff && !r.skipped) {
    const double unscale = 1.0 / r.loss_scale;
    const GnsBatches b = gns_batches(cfg, state.world(), gns);
    r.gns_step =
        gns_estimate(gns_small_sq * unscale * unscale, b.small, r.grad_norm * r.grad_norm, b.big);
  }
  // A small batch's norm can overflow under fp16 loss scaling while the step's does not: such a
  // step is left out of the EMAs, which one infinite value would spoil for the rest of the run.
  if (gns != GnsSource::kOff && !r.skipped && std::isfinite(r.gns_step.g2) &&
      std::isfinite(r.gns_step.trace)) {
    GnsTracker& tracker = state.gns_tracker();
    tracker.update(r.gns_step);
    r.gns = true;
    r.gns_g2_ema = tracker.g2_ema();
    r.gns_trace_ema = tracker.trace_ema();
    r.b_simple = tracker.b_simple();
  }
  if (r.skipped) {
    LLM_REQUIRE(state.plan().scaler_on, "non-finite gradients at step ", step,
                ": training diverged (try a lower optim.lr)");
    const LossScalerState& sc = state.scaler().state();
    LLM_REQUIRE(sc.consecutive_skips < cfg.precision.max_consecutive_skips,
                "fp16: ", sc.consecutive_skips,
                " consecutive steps with non-finite gradients at step ", step, " (loss scale ",
                state.scaler().scale(), "): stopping");
  }
  return r;
}

}  // namespace ledgerlm
