// Evaluation: mean loss per token (nats) over a fixed set of windows, and bits per byte.
#pragma once

#include <cstdint>
#include <vector>

#include "data/shard.h"
#include "model/gpt.h"

namespace ledgerlm {

class Comm;

struct EvalResult {
  double loss = 0.0;   // nats per token
  int64_t tokens = 0;  // predicted tokens
  double bpb = 0.0;    // bits per byte of text: loss / ln 2 x tokens_per_byte of the split
  double perplexity = 0.0;
};

// Windows start at `starts` (each covers seq + 1 tokens: inputs and shifted targets). Runs
// forward in batches of `batch` windows (the last batch padded by repeating its first window;
// padded rows are not counted). `tokens_per_byte` of the split turns nats/token into bits/byte.
EvalResult evaluate_windows(GptModel& model, Tensor params, const TokenArray& tokens,
                            const std::vector<int64_t>& starts, int64_t seq, int64_t batch,
                            double tokens_per_byte);

// The same split across the ranks of `comm`: rank r takes windows r, r + world, ...; every rank
// runs the same number of batches (sharded weights are gathered collectively), and the loss
// sums are added across ranks. Weights through `units` (unit_access.h).
EvalResult evaluate_windows_ranks(GptModel& model, UnitAccess& units, Comm& comm,
                                  const TokenArray& tokens, const std::vector<int64_t>& starts,
                                  int64_t seq, int64_t batch, double tokens_per_byte);

}  // namespace ledgerlm
