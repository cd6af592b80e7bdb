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
#include "model/backend/cpu/cpu_crossentropy.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {

void CpuBackend::softcap_forward(Tensor y, Tensor x, int64_t n, double cap) {
  if (n <= 0) return;
  LLM_REQUIRE(cap > 0.0, "cpu backend: softcap_forward needs cap > 0, got ", cap);
  const DType act = require_act_dtype(x, "softcap_forward x");
  require_act(y, act, "softcap_forward y");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* yp = y.as<T>();
    const T* xp = x.as<const T>();
    const T c = static_cast<T>(cap), inv = static_cast<T>(1.0 / cap);
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) yp[i] = c * std::tanh(xp[i] * inv);
    });
  });
}

void CpuBackend::softcap_cross_entropy(Tensor losses, Tensor logits, Tensor target_ids,
                                       int64_t rows, int64_t vocab, int64_t padded_vocab,
                                       double grad_scale, double cap) {
  LLM_REQUIRE(cap > 0.0, "cpu backend: softcap_cross_entropy needs cap > 0, got ", cap);
  const DType act = require_act_dtype(logits, "softcap_cross_entropy logits");
  const int32_t* targets = require_cross_entropy_args("softcap_cross_entropy", losses, act,
                                                      target_ids, rows, vocab, padded_vocab);
  const bool write_grad = grad_scale != 0.0;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* lp = logits.as<T>();
    T* loss = losses.as<T>();
    const int64_t v = vocab, pv = padded_vocab;
    const T inv_cap = static_cast<T>(1.0 / cap);
    parallel_rows(rows, threads_, rows * v > 32768, [&](int64_t r) {
      T* y = lp + r * pv;
      const int64_t target = targets[r];
      T mx = -INFINITY;
      for (int64_t j = 0; j < v; ++j) mx = std::max(mx, y[j]);
      double sum = 0.0;
      for (int64_t j = 0; j < v; ++j) sum += static_cast<double>(std::exp(y[j] - mx));
      const double lse = static_cast<double>(mx) + std::log(sum);
      loss[r] = static_cast<T>(lse - static_cast<double>(y[target]));
      if (!write_grad) return;
      const T scaled_inv = static_cast<T>(grad_scale / sum);
      const T gs = static_cast<T>(grad_scale);
      for (int64_t j = 0; j < v; ++j) {
        const T t = y[j] * inv_cap;  // tanh(x / cap), read before the row is overwritten
        T g = std::exp(y[j] - mx) * scaled_inv;
        if (j == target) g -= gs;
        y[j] = g * (T(1) - t * t);
      }
      for (int64_t j = v; j < pv; ++j) y[j] = T(0);
    });
  });
}

}  // namespace ledgerlm::cpu
