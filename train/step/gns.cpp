// The gradient noise scale estimator (see gns.h).
#include "train/step/gns.h"

#include <cmath>
#include <limits>

#include "model/base/check.h"

namespace ledgerlm {

GnsEstimate gns_estimate(double small_sq, double b_small, double big_sq, double b_big) {
  LLM_REQUIRE(b_small > 0 && b_big > b_small, "gns: batch sizes ", b_small, " and ", b_big,
              ": expected 0 < B_small < B_big");
  GnsEstimate e;
  e.g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small);
  e.trace = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big);
  return e;
}

void GnsTracker::update(const GnsEstimate& e) {
  g2_ = decay_ * g2_ + (1.0 - decay_) * e.g2;
  trace_ = decay_ * trace_ + (1.0 - decay_) * e.trace;
  weight_ = decay_ * weight_ + (1.0 - decay_);
  ++steps_;
}

double GnsTracker::g2_ema() const {
  return steps_ > 0 ? g2_ / weight_ : std::numeric_limits<double>::quiet_NaN();
}

double GnsTracker::trace_ema() const {
  return steps_ > 0 ? trace_ / weight_ : std::numeric_limits<double>::quiet_NaN();
}

double GnsTracker::b_simple() const {
  const double g2 = g2_ema();
  if (!(g2 > 0)) return std::numeric_limits<double>::quiet_NaN();
  return trace_ema() / g2;
}

const char* gns_source_name(GnsSource source) {
  switch (source) {
    case GnsSource::kOff:
      return "off";
    case GnsSource::kRanks:
      return "ranks";
    case GnsSource::kMicroBatches:
      return "micro-batches";
  }
  return "?";
}

GnsSource gns_source(const RunConfig& config, int world, int stage) {
  if (!config.train.gns) return GnsSource::kOff;
  LLM_REQUIRE(world > 1 || config.train.accum > 1,
              "train.gns: needs two batch sizes, but world 1 x train.accum 1 has one (use "
              "train.accum > 1 or more ranks)");
  LLM_REQUIRE(stage <= 1 || world == 1, "train.gns: not available at dist.zero = ", stage,
              " (local gradients are reduce-scattered during backward); use dist.zero 0 or 1");
  return world > 1 ? GnsSource::kRanks : GnsSource::kMicroBatches;
}

GnsBatches gns_batches(const RunConfig& config, int world, GnsSource source) {
  const double micro = static_cast<double>(config.train.micro_batch);
  const double accum = static_cast<double>(config.train.accum);
  GnsBatches b;
  b.big = micro * accum * world;
  b.small = source == GnsSource::kRanks ? micro * accum : micro;
  return b;
}

}  // namespace ledgerlm
