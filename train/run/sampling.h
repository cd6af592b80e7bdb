// Choosing the next token from logits: temperature, top-k, top-p (nucleus), seeded.
#pragma once

#include <cstdint>

namespace ledgerlm {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (argmax)
  int64_t top_k = 0;         // keep the k most likely (0: all)
  double top_p = 1.0;        // keep the smallest set with mass >= top_p (1: all)
  uint64_t seed = 0;
};

// The token drawn at generation position `position` (the random number is a pure function of
// (seed, position), so the same seed gives the same text, cached or not).
int32_t sample_token(const float* logits, int64_t vocab, const SamplingOptions& options,
                     uint64_t position);

}  // namespace ledgerlm
