// Evaluation over fixed windows (see evaluator.h).
#include "train/run/evaluator.h"

#include <cmath>

#include "model/base/check.h"
#include "train/comm/comm.h"

namespace ledgerlm {
namespace {

struct EvalSums {
  double loss = 0.0;
  int64_t tokens = 0;
};

// Forward passes over `starts` in `batches` batches of `batch` windows (more batches than the
// windows need repeat the first window, uncounted).
EvalSums eval_sums(GptModel& model, UnitAccess& units, const TokenArray& tokens,
                   const std::vector<int64_t>& starts, int64_t seq, int64_t batch,
                   int64_t batches) {
  EvalSums sums;
  std::vector<int32_t> window(static_cast<size_t>(seq + 1));
  std::vector<int32_t> inputs(static_cast<size_t>(batch * seq)), targets(inputs.size());
  ForwardOptions opts;
  opts.training = false;
  for (int64_t k = 0; k < batches; ++k) {
    const int64_t first = k * batch;
    const int64_t valid =
        std::clamp<int64_t>(static_cast<int64_t>(starts.size()) - first, 0, batch);
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t start = starts[static_cast<size_t>(
          b < valid ? first + b
                    : std::min<int64_t>(first, static_cast<int64_t>(starts.size()) - 1))];
      tokens.copy(start, seq + 1, window.data());
      std::copy(window.begin(), window.end() - 1, inputs.begin() + b * seq);
      std::copy(window.begin() + 1, window.end(), targets.begin() + b * seq);
    }
    model.forward(units, inputs.data(), targets.data(), batch, seq, opts);
    sums.loss += model.token_loss_sum(valid * seq);
    sums.tokens += valid * seq;
  }
  return sums;
}

EvalResult eval_result(double loss_sum, int64_t tokens, double tokens_per_byte) {
  EvalResult r;
  r.tokens = tokens;
  r.loss = loss_sum / static_cast<double>(tokens);
  r.bpb = r.loss / std::log(2.0) * tokens_per_byte;
  r.perplexity = std::exp(r.loss);
  return r;
}

void require_windows(const std::vector<int64_t>& starts, int64_t seq) {
  LLM_REQUIRE(!starts.empty(),
              "evaluation: no windows (is the split shorter than seq_len + 1 = ", seq + 1,
              " tokens?)");
}

}  // namespace

EvalResult evaluate_windows(GptModel& model, Tensor params, const TokenArray& tokens,
                            const std::vector<int64_t>& starts, int64_t seq, int64_t batch,
                            double tokens_per_byte) {
  require_windows(starts, seq);
  FlatUnits units(model.table(), params);
  const int64_t batches = (static_cast<int64_t>(starts.size()) + batch - 1) / batch;
  const EvalSums s = eval_sums(model, units, tokens, starts, seq, batch, batches);
  return eval_result(s.loss, s.tokens, tokens_per_byte);
}

EvalResult evaluate_windows_ranks(GptModel& model, UnitAccess& units, Comm& comm,
                                  const TokenArray& tokens, const std::vector<int64_t>& starts,
                                  int64_t seq, int64_t batch, double tokens_per_byte) {
  require_windows(starts, seq);
  const int64_t world = comm.world();
  std::vector<int64_t> mine;
  for (size_t k = static_cast<size_t>(comm.rank()); k < starts.size();
       k += static_cast<size_t>(world))
    mine.push_back(starts[k]);
  const int64_t per_rank = (static_cast<int64_t>(starts.size()) + world - 1) / world;
  const int64_t batches = (per_rank + batch - 1) / batch;
  if (mine.empty()) mine.push_back(starts.front());  // padding only: nothing counted
  EvalSums s = eval_sums(model, units, tokens, mine, seq, batch, batches);
  if (static_cast<size_t>(comm.rank()) >= starts.size()) s = EvalSums{};
  double sums[2] = {s.loss, static_cast<double>(s.tokens)};
  comm.all_reduce_sum(sums, 2);
  return eval_result(sums[0], static_cast<int64_t>(sums[1]), tokens_per_byte);
}

}  // namespace ledgerlm
