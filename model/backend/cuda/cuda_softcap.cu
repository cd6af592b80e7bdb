// The logit soft-cap on the GPU (model.logit_softcap): y = cap * tanh(x / cap), and the softmax
// cross-entropy over capped logits with the gradient taken with respect to the uncapped ones
// (Backend::softcap_cross_entropy): cuda_crossentropy.cu's one block per row, the cap's
// derivative 1 - (y / cap)^2 read from the row before it is overwritten.
#include <cmath>

#include "model/backend/cuda/cuda_act_checks.h"
#include "model/backend/cuda/cuda_ce_row.cuh"
#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T>
__global__ void softcap_forward_kernel(T* y, const T* x, int64_t n, T cap, T inv) {
  LLM_GRID_STRIDE(i, n) y[i] = cap * tanh(x[i] * inv);
}

template <class T>
__global__ void softcap_ce_kernel(T* losses, T* logits, const int32_t* targets, int64_t v,
                                  int64_t pv, double grad_scale, T inv_cap) {
  const int64_t r = blockIdx.x;
  T* y = logits + r * pv;
  const CeRow<T> row = ce_row_loss(losses + r, y, v, targets + r);
  if (grad_scale == 0.0) return;
  const T scaled_inv = static_cast<T>(grad_scale / row.sum);
  const T gs = static_cast<T>(grad_scale);
  for (int64_t j = threadIdx.x; j < pv; j += blockDim.x) {
    if (j < v) {
      const T t = y[j] * inv_cap;
      T g = exp(y[j] - row.mx) * scaled_inv;
      if (j == row.target) g -= gs;
      y[j] = g * (T(1) - t * t);
    } else {
      y[j] = T(0);
    }
  }
}

}  // namespace

void CudaBackend::softcap_forward(Tensor y, Tensor x, int64_t n, double cap) {
  if (n <= 0) return;
  LLM_REQUIRE(cap > 0.0, "cuda backend: softcap_forward needs cap > 0, got ", cap);
  const DType act = act_of(x, "softcap_forward x");
  same_act(y, act, "softcap_forward y");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    softcap_forward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(
        y.as<T>(), x.as<const T>(), n, static_cast<T>(cap), static_cast<T>(1.0 / cap));
  });
  launch_check("softcap_forward");
}

void CudaBackend::softcap_cross_entropy(Tensor losses, Tensor logits, Tensor target_ids,
                                        int64_t rows, int64_t vocab, int64_t padded_vocab,
                                        double grad_scale, double cap) {
  LLM_REQUIRE(target_ids.empty() || target_ids.dtype == DType::kI32,
              "cuda backend: softcap_cross_entropy targets must be int32");
  LLM_REQUIRE(cap > 0.0, "cuda backend: softcap_cross_entropy needs cap > 0, got ", cap);
  LLM_REQUIRE(logits.data && dtype_is_act(logits.dtype),
              "cuda backend: softcap_cross_entropy logits fp32/fp64");
  LLM_REQUIRE(losses.data && losses.dtype == logits.dtype,
              "cuda backend: softcap_cross_entropy losses must have the logits' dtype");
  LLM_REQUIRE(rows >= 0 && vocab > 0 && padded_vocab >= vocab,
              "cuda backend: softcap_cross_entropy needs 0 < vocab <= padded_vocab, got vocab=",
              vocab, " padded_vocab=", padded_vocab);
  if (rows == 0) return;
  LLM_REQUIRE(target_ids.data != nullptr, "cuda backend: softcap_cross_entropy targets null");
  dispatch_act(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    softcap_ce_kernel<T><<<static_cast<unsigned>(rows), 512, 0, stream_>>>(
        losses.as<T>(), logits.as<T>(), target_ids.as<const int32_t>(), vocab, padded_vocab,
        grad_scale, static_cast<T>(1.0 / cap));
  });
  launch_check("softcap_cross_entropy");
}

}  // namespace ledgerlm::cuda
