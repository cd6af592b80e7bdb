// Fused softmax + cross-entropy over the first `vocab` of `padded_vocab` logit columns.
//
// Per row: max-subtracted log-sum-exp (the sum accumulated in double, so a 50k-column fp32 row
// loses nothing to the summation), loss = lse - logit[target]. With grad_scale != 0 the row is
// overwritten by grad_scale * (softmax - onehot(target)) and the padding columns by 0, so a
// later GEMM over the padded width sees no gradient there. Rows are independent: parallel over
// rows, deterministic for any thread count. fp32 rows run on the kernel table of the backend's
// path (vector max, exp and scaling; the exp sum still in double lanes), fp64 the loops here.
#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_crossentropy.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {

const int32_t* require_cross_entropy_args(const char* op, Tensor losses, DType act,
                                          Tensor target_ids, int64_t rows, int64_t vocab,
                                          int64_t padded_vocab) {
  LLM_REQUIRE(target_ids.empty() || target_ids.dtype == DType::kI32, "cpu backend: ", op,
              " targets must be int32");
  const int32_t* targets = target_ids.as<const int32_t>();
  require_act(losses, act, op, " losses");
  LLM_REQUIRE(rows >= 0 && vocab > 0 && padded_vocab >= vocab, "cpu backend: ", op,
              " needs 0 < vocab <= padded_vocab, got vocab=", vocab,
              " padded_vocab=", padded_vocab);
  LLM_REQUIRE(targets != nullptr || rows == 0, "cpu backend: ", op, " targets null");
  bool targets_ok = true;
  for (int64_t r = 0; r < rows; ++r)
    targets_ok = targets_ok && targets[r] >= 0 && targets[r] < vocab;
  LLM_REQUIRE(targets_ok, "cpu backend: ", op, " targets must be in [0, ", vocab, ")");
  return targets;
}

void CpuBackend::softmax_cross_entropy(Tensor losses, Tensor logits, Tensor target_ids,
                                       int64_t rows, int64_t vocab, int64_t padded_vocab,
                                       double grad_scale) {
  const DType act = require_act_dtype(logits, "softmax_cross_entropy logits");
  const int32_t* targets = require_cross_entropy_args("softmax_cross_entropy", losses, act,
                                                      target_ids, rows, vocab, padded_vocab);
  const bool write_grad = grad_scale != 0.0;
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* lp = logits.as<T>();
    T* loss = losses.as<T>();
    const int64_t v = vocab, pv = padded_vocab;
    const CpuKernels& kern = *kernels_;
    parallel_rows(rows, threads_, rows * v > 32768, [&](int64_t r) {
      T* x = lp + r * pv;
      const int64_t target = targets[r];
      const T target_logit = x[target];
      T mx = -INFINITY;
      double sum = 0.0;
      if constexpr (std::is_same_v<T, float>) {
        mx = kern.row_max(x, v);
        // With the gradient the row is overwritten anyway: exp(x - max) stays in place, so exp
        // runs once per column.
        sum = kern.exp_sum_row(x, v, mx, write_grad);
      } else {
        for (int64_t j = 0; j < v; ++j) mx = std::max(mx, x[j]);
        if (write_grad) {
          for (int64_t j = 0; j < v; ++j) {
            x[j] = std::exp(x[j] - mx);
            sum += static_cast<double>(x[j]);
          }
        } else {
          for (int64_t j = 0; j < v; ++j) sum += static_cast<double>(std::exp(x[j] - mx));
        }
      }
      const double lse = static_cast<double>(mx) + std::log(sum);
      loss[r] = static_cast<T>(lse - static_cast<double>(target_logit));
      if (!write_grad) return;
      const T scaled_inv = static_cast<T>(grad_scale / sum);
      const T gs = static_cast<T>(grad_scale);
      if constexpr (std::is_same_v<T, float>) {
        kern.scale_row(x, v, scaled_inv);
      } else {
        for (int64_t j = 0; j < v; ++j) x[j] *= scaled_inv;
      }
      x[target] -= gs;
      for (int64_t j = v; j < pv; ++j) x[j] = T(0);
    });
  });
}

}  // namespace ledgerlm::cpu
