// Token sampling (see sampling.h).
#include "train/run/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "model/base/rng.h"

namespace ledgerlm {

int32_t sample_token(const float* logits, int64_t vocab, const SamplingOptions& o,
                     uint64_t position) {
  if (o.temperature <= 0.0) {
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  }
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  // Sort by logit descending; ties broken by id so the order is total and deterministic.
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  size_t keep = order.size();
  if (o.top_k > 0) keep = std::min(keep, static_cast<size_t>(o.top_k));
  std::vector<double> probs(keep);
  const double maxv = logits[order[0]];
  double sum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp((logits[order[i]] - maxv) / o.temperature);
    sum += probs[i];
  }
  for (auto& p : probs) p /= sum;
  if (o.top_p < 1.0) {
    double mass = 0.0;
    size_t n = 0;
    while (n < keep && mass < o.top_p) mass += probs[n++];
    keep = std::max<size_t>(n, 1);
    probs.resize(keep);
    double s2 = std::accumulate(probs.begin(), probs.end(), 0.0);
    for (auto& p : probs) p /= s2;
  }
  auto bits = rng_bits(o.seed, RngStream::kSample, position, 0);
  double u = (static_cast<double>(bits[0]) * 4294967296.0 + bits[1]) / 18446744073709551616.0;
  double acc = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    acc += probs[i];
    if (u < acc) return order[i];
  }
  return order[keep - 1];
}

}  // namespace ledgerlm
