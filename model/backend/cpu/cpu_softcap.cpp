// The logit soft-cap (model.logit_softcap): y = cap * tanh(x / cap) on the logits, and the
// softmax cross-entropy over capped logits whose gradient is taken with respect to the uncapped
// ones (see Backend::softcap_cross_entropy).
//
// The cross-entropy follows cpu_crossentropy.cpp (max-subtracted log-sum-exp with the sum in
// double, rows in parallel, padding columns zeroed). fp32 runs the kernel table of the backend's
// path (the row max and exp sum of the plain cross-entropy, the cap and the row's gradient on
// the vector exp: cpu_softcap_body.h), fp64 the plain loops (cpu_softcap_loops.h), which are
// also the portable path's fp32 kernels.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_crossentropy.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

#include "model/backend/cpu/cpu_softcap_loops.h"

}  // namespace

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
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>)
        kern.softcap_forward(yp + begin, xp + begin, end - begin, c, inv);
      else
        softcap_forward_loop<T>(yp + begin, xp + begin, end - begin, c, inv);
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
    const CpuKernels& kern = *kernels_;
    parallel_rows(rows, threads_, rows * v > 32768, [&](int64_t r) {
      T* y = lp + r * pv;
      const int64_t target = targets[r];
      T mx = -INFINITY;
      double sum = 0.0;
      if constexpr (std::is_same_v<T, float>) {
        mx = kern.row_max(y, v);
        sum = kern.exp_sum_row(y, v, mx, false);  // the row stays: the cap's derivative needs it
      } else {
        for (int64_t j = 0; j < v; ++j) mx = std::max(mx, y[j]);
        for (int64_t j = 0; j < v; ++j) sum += static_cast<double>(std::exp(y[j] - mx));
      }
      const double lse = static_cast<double>(mx) + std::log(sum);
      loss[r] = static_cast<T>(lse - static_cast<double>(y[target]));
      if (!write_grad) return;
      const T scaled_inv = static_cast<T>(grad_scale / sum);
      const T gs = static_cast<T>(grad_scale);
      if constexpr (std::is_same_v<T, float>)
        kern.softcap_grad_row(y, v, mx, scaled_inv, inv_cap, target, gs);
      else
        softcap_grad_loop<T>(y, v, mx, scaled_inv, inv_cap, target, gs);
      for (int64_t j = v; j < pv; ++j) y[j] = T(0);
    });
  });
}

}  // namespace ledgerlm::cpu
