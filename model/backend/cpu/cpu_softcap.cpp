// The logit soft-cap (model.logit_softcap): y = cap * tanh(x / cap) on the logits, and the
// softmax cross-entropy over capped logits whose gradient is taken with respect to the uncapped
// ones (see Backend::softcap_cross_entropy).
//
// The cross-entropy follows cpu_crossentropy.cpp (max-subtracted log-sum-exp with the sum in
// double, rows in parallel, padding columns zeroed) with plain loops for both dtypes: the
// soft-capped head is a variant, not the default path the vector kernel table serves.
#include <algorithm>
#include <cmath>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"

namespace ledgerlm::cpu {

void CpuBackend::softcap_forward(Tensor y, Tensor x, int64_t n, double cap) {
  if (n <= 0) return;
  LLM_REQUIRE(cap > 0.0, "cpu backend: softcap_forward needs cap > 0, got ", cap);
  const DType act = require_act_dtype(x, "softcap_forward x");
  require_act(y, act, "softcap_forward y");
  constexpr int64_t kChunk = 1 << 14;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.as<T>();
    const T* xp = x.as<const T>();
    const T c = static_cast<T>(cap), inv = static_cast<T>(1.0 / cap);
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t k = 0; k < chunks; ++k) {
      const int64_t begin = k * kChunk, end = std::min(n, begin + kChunk);
      for (int64_t i = begin; i < end; ++i) yp[i] = c * std::tanh(xp[i] * inv);
    }
  });
}

void CpuBackend::softcap_cross_entropy(Tensor losses, Tensor logits, Tensor target_ids,
                                       int64_t rows, int64_t vocab, int64_t padded_vocab,
                                       double grad_scale, double cap) {
  LLM_REQUIRE(target_ids.empty() || target_ids.dtype == DType::kI32,
              "cpu backend: softcap_cross_entropy targets must be int32");
  LLM_REQUIRE(cap > 0.0, "cpu backend: softcap_cross_entropy needs cap > 0, got ", cap);
  const int32_t* targets = target_ids.as<const int32_t>();
  const DType act = require_act_dtype(logits, "softcap_cross_entropy logits");
  require_act(losses, act, "softcap_cross_entropy losses");
  LLM_REQUIRE(rows >= 0 && vocab > 0 && padded_vocab >= vocab,
              "cpu backend: softcap_cross_entropy needs 0 < vocab <= padded_vocab, got vocab=",
              vocab, " padded_vocab=", padded_vocab);
  LLM_REQUIRE(targets != nullptr || rows == 0, "cpu backend: softcap_cross_entropy targets null");
  bool targets_ok = true;
  for (int64_t r = 0; r < rows; ++r)
    targets_ok = targets_ok && targets[r] >= 0 && targets[r] < vocab;
  LLM_REQUIRE(targets_ok, "cpu backend: softcap_cross_entropy targets must be in [0, ", vocab, ")");
  const bool write_grad = grad_scale != 0.0;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* lp = logits.as<T>();
    T* loss = losses.as<T>();
    const int64_t v = vocab, pv = padded_vocab;
    const T inv_cap = static_cast<T>(1.0 / cap);
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * v > 32768)
    for (int64_t r = 0; r < rows; ++r) {
      T* y = lp + r * pv;
      const int64_t target = targets[r];
      T mx = -INFINITY;
      for (int64_t j = 0; j < v; ++j) mx = std::max(mx, y[j]);
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += static_cast<double>(std::exp(y[j] - mx));
      const double lse = static_cast<double>(mx) + std::log(sum);
      loss[r] = static_cast<T>(lse - static_cast<double>(y[target]));
      if (!write_grad) continue;
      const T scaled_inv = static_cast<T>(grad_scale / sum);
      const T gs = static_cast<T>(grad_scale);
      for (int64_t j = 0; j < v; ++j) {
        const T t = y[j] * inv_cap;  // tanh(x / cap), read before the row is overwritten
        T g = std::exp(y[j] - mx) * scaled_inv;
        if (j == target) g -= gs;
        y[j] = g * (T(1) - t * t);
      }
      for (int64_t j = v; j < pv; ++j) y[j] = T(0);
    }
  });
}

}  // namespace ledgerlm::cpu
