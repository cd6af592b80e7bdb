// Shared by the whole-model gradient checks (test_model_gradcheck, test_model_lora_gradcheck):
// the fixed batch they run and the central differences of one tensor's elements.
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_table.h"

namespace ledgerlm::testing {

// The gradient checks' batch: B*T tokens and targets, fixed patterns below `vocab`.
inline void gradcheck_batch(int64_t n, int64_t vocab, std::vector<int32_t>* tokens,
                            std::vector<int32_t>* targets) {
  tokens->assign(static_cast<size_t>(n), 0);
  targets->assign(static_cast<size_t>(n), 0);
  for (int64_t i = 0; i < n; ++i) {
    (*tokens)[i] = static_cast<int32_t>((7 * i + 3) % vocab);
    (*targets)[i] = static_cast<int32_t>((5 * i + 1) % vocab);
  }
}

// For each checked element of `info` (the first 8, then every `stride`-th): the central difference
// (loss(x + h) - loss(x - h)) / 2h into `numeric` and the backward's gradient into `analytic`.
// `loss` evaluates the model at the current `params`; each element is restored after its pair.
template <class Loss>
void central_differences(const ParamInfo& info, int64_t stride, double h,
                         std::vector<double>& params, const std::vector<double>& grads,
                         const Loss& loss, std::vector<double>* numeric,
                         std::vector<double>* analytic) {
  for (int64_t i = 0; i < info.numel; ++i) {
    if (i >= 8 && i % stride != 0) continue;
    double& x = params[static_cast<size_t>(info.offset + i)];
    const double saved = x;
    x = saved + h;
    const double lp = loss();
    x = saved - h;
    const double lm = loss();
    x = saved;
    numeric->push_back((lp - lm) / (2 * h));
    analytic->push_back(grads[static_cast<size_t>(info.offset + i)]);
  }
}

}  // namespace ledgerlm::testing
