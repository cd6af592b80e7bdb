// Fused softmax + cross-entropy over the first `vocab` of `padded_vocab` logit columns, one
// block per row: the max, then the sum of exp(x - max) in double (fixed tree), the loss
// lse - x[target]; with grad_scale != 0 the row is overwritten in place by
// grad_scale * (softmax - onehot) and the padding by 0. The probabilities are never stored
// anywhere but in the logits buffer itself. Targets are not range-checked on the device.
#include <cmath>

#include "model/backend/cuda/cuda_ce_row.cuh"
#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T>
__global__ void softmax_ce_kernel(T* losses, T* logits, const int32_t* targets, int64_t v,
                                  int64_t pv, double grad_scale) {
  const int64_t r = blockIdx.x;
  T* x = logits + r * pv;
  const CeRow<T> row = ce_row_loss(losses + r, x, v, targets + r);
  if (grad_scale == 0.0) return;
  const T scaled_inv = static_cast<T>(grad_scale / row.sum);
  const T gs = static_cast<T>(grad_scale);
  for (int64_t j = threadIdx.x; j < pv; j += blockDim.x) {
    if (j < v) {
      T p = exp(x[j] - row.mx) * scaled_inv;
      if (j == row.target) p -= gs;
      x[j] = p;
    } else {
      x[j] = T(0);
    }
  }
}

}  // namespace

void CudaBackend::softmax_cross_entropy(Tensor losses, Tensor logits, Tensor target_ids,
                                        int64_t rows, int64_t vocab, int64_t padded_vocab,
                                        double grad_scale) {
  LLM_REQUIRE(target_ids.empty() || target_ids.dtype == DType::kI32,
              "cuda backend: softmax_cross_entropy targets must be int32");
  LLM_REQUIRE(logits.data && dtype_is_act(logits.dtype),
              "cuda backend: softmax_cross_entropy logits fp32/fp64");
  LLM_REQUIRE(losses.data && losses.dtype == logits.dtype,
              "cuda backend: softmax_cross_entropy losses must have the logits' dtype");
  LLM_REQUIRE(rows >= 0 && vocab > 0 && padded_vocab >= vocab,
              "cuda backend: softmax_cross_entropy needs 0 < vocab <= padded_vocab, got vocab=",
              vocab, " padded_vocab=", padded_vocab);
  if (rows == 0) return;
  LLM_REQUIRE(target_ids.data != nullptr, "cuda backend: softmax_cross_entropy targets null");
  dispatch_act(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    softmax_ce_kernel<T><<<static_cast<unsigned>(rows), 512, 0, stream_>>>(
        losses.as<T>(), logits.as<T>(), target_ids.as<const int32_t>(), vocab, padded_vocab,
        grad_scale);
  });
  launch_check("softmax_cross_entropy");
}

}  // namespace ledgerlm::cuda
