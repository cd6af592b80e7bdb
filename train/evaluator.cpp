// Evaluation over fixed windows (see evaluator.h).
#include "train/evaluator.h"

#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {

EvalResult evaluate_windows(GptModel& model, Tensor params, const TokenArray& tokens,
                            const std::vector<int64_t>& starts, int64_t seq, int64_t batch,
                            double tokens_per_byte) {
  LLM_REQUIRE(!starts.empty(),
              "evaluation: no windows (is the split shorter than seq_len + 1 = ", seq + 1,
              " tokens?)");
  EvalResult r;
  std::vector<int32_t> window(static_cast<size_t>(seq + 1));
  std::vector<int32_t> inputs(static_cast<size_t>(batch * seq)), targets(inputs.size());
  double sum = 0.0;
  ForwardOptions opts;
  opts.training = false;
  for (size_t first = 0; first < starts.size(); first += static_cast<size_t>(batch)) {
    int64_t valid = std::min<int64_t>(batch, static_cast<int64_t>(starts.size() - first));
    for (int64_t b = 0; b < batch; ++b) {
      int64_t start = starts[first + static_cast<size_t>(b < valid ? b : 0)];
      tokens.copy(start, seq + 1, window.data());
      std::copy(window.begin(), window.end() - 1, inputs.begin() + b * seq);
      std::copy(window.begin() + 1, window.end(), targets.begin() + b * seq);
    }
    model.forward(params, inputs.data(), targets.data(), batch, seq, opts);
    Tensor losses = model.token_losses();
    for (int64_t i = 0; i < valid * seq; ++i)
      sum += losses.dtype == DType::kF64 ? losses.as<double>()[i] : losses.as<float>()[i];
    r.tokens += valid * seq;
  }
  r.loss = sum / static_cast<double>(r.tokens);
  r.bpb = r.loss / std::log(2.0) * tokens_per_byte;
  r.perplexity = std::exp(r.loss);
  return r;
}

std::vector<int64_t> evaluate_all_windows(int64_t num_tokens, int64_t seq, int64_t max_windows) {
  std::vector<int64_t> starts;
  int64_t count = (num_tokens - 1) / seq;
  if (count <= 0) return starts;
  if (max_windows > 0 && count > max_windows) {
    // Evenly spaced, deterministic.
    for (int64_t i = 0; i < max_windows; ++i) starts.push_back((i * count / max_windows) * seq);
  } else {
    for (int64_t i = 0; i < count; ++i) starts.push_back(i * seq);
  }
  return starts;
}

}  // namespace ledgerlm
