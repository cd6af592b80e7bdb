// The gradient noise scale B_simple (McCandlish et al. 2018, "An Empirical Model of Large-Batch
// Training", appendix A), estimated online from the squared norms of one step's gradient over two
// batch sizes. Batch sizes are counted in sequences throughout (the unit of train.micro_batch and
// of the global batch world x micro x accum).
//
// Both norms are of mean-reduced gradients (the loss is a mean over sequences), before clipping
// and with any fp16 loss scale removed. With B_small < B_big and E|g_B|^2 = |G|^2 + tr(S)/B:
//   |G|^2 est. = (B_big |g_big|^2 - B_small |g_small|^2) / (B_big - B_small)
//   tr(S) est. = (|g_small|^2 - |g_big|^2) / (1/B_small - 1/B_big)
// are unbiased, but their ratio is not: B_simple = tr(S) / |G|^2 is taken from EMAs of the two
// estimates, never as an EMA of per-step ratios.
//
// Where the small batch comes from (gns_source): under data parallelism each rank's local gradient
// before the reduction (B_small = micro x accum; costs one pass over the gradients and a scalar
// all-reduce), else each micro-batch's own gradient under accumulation (B_small = micro; needs a
// gradient-sized buffer, see ModelState). World 1 x accum 1 has no second batch size: refused.
#pragma once

#include <cstdint>

#include "train/config/run_config.h"

namespace ledgerlm {

struct GnsEstimate {
  double g2 = 0.0;     // |G|^2: the squared norm of the true (expected) gradient
  double trace = 0.0;  // tr(Sigma): the per-sequence gradient covariance's trace
};

// The two unbiased estimates from one pair of squared norms. `small_sq` is |g_small|^2 (the mean
// over the small batches when there are several), `big_sq` |g_big|^2; b_small < b_big.
GnsEstimate gns_estimate(double small_sq, double b_small, double big_sq, double b_big);

// EMAs of the two estimates (bias-corrected like Adam's moments, so the first steps are not
// pulled towards 0) and B_simple from them.
class GnsTracker {
 public:
  explicit GnsTracker(double decay = 0.95) : decay_(decay) {}
  void update(const GnsEstimate& e);
  double g2_ema() const;
  double trace_ema() const;
  // tr(Sigma) EMA / |G|^2 EMA; NaN before the first update or when the |G|^2 EMA is not > 0.
  double b_simple() const;
  int64_t steps() const { return steps_; }

 private:
  double decay_;
  double g2_ = 0.0, trace_ = 0.0, weight_ = 0.0;  // weight_ = 1 - decay^steps
  int64_t steps_ = 0;
};

enum class GnsSource {
  kOff,           // train.gns = false
  kRanks,         // each rank's local gradient before the all-reduce: B_small = micro x accum
  kMicroBatches,  // each micro-batch's gradient on one rank: B_small = micro
};
const char* gns_source_name(GnsSource source);  // "off", "ranks", "micro-batches"

// The source train.gns uses at `world` ranks under ZeRO stage `stage` (the one in effect). With
// both available the ranks' gradients are preferred: no buffer and one pass per step, against a
// gradient-sized buffer and one pass per micro-batch (Backend::sum_squares_fold). Refuses (Error,
// one line) world 1 x accum 1 and stages 2-3 (their local gradients are reduce-scattered unit by
// unit in backward).
GnsSource gns_source(const RunConfig& config, int world, int stage);

// The batch sizes in sequences: {B_small, B_big} for the source.
struct GnsBatches {
  double small = 0.0, big = 0.0;
};
GnsBatches gns_batches(const RunConfig& config, int world, GnsSource source);

}  // namespace ledgerlm
