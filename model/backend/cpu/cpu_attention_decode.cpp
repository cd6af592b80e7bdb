// Incremental-decoding attention on the CPU: one query row per head against the KV cache (see
// Backend::attention_decode). Scores in fp32, a max-subtracted softmax, heads in order — the
// arithmetic the KV-cache decoder has always used, so sampled tokens do not change.
#include <cmath>

#include "model/backend/cpu/cpu_backend.h"
#include "model/base/check.h"

namespace ledgerlm::cpu {

void CpuBackend::attention_decode(Tensor out, Tensor q_t, Tensor k_cache, Tensor v_cache,
                                  int64_t positions, int64_t heads, int64_t channels,
                                  int64_t stride) {
  LLM_REQUIRE(out.dtype == DType::kF32 && q_t.dtype == DType::kF32 &&
                  k_cache.dtype == DType::kF32 && v_cache.dtype == DType::kF32,
              "cpu backend: attention_decode is fp32");
  LLM_REQUIRE(positions > 0 && heads > 0 && channels % heads == 0 && stride >= channels,
              "cpu backend: attention_decode needs positions > 0 and channels divisible by heads");
  const int64_t hd = channels / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* q_all = q_t.as<const float>();
  const float* kc = k_cache.as<const float>();
  const float* vc = v_cache.as<const float>();
  float* att = out.as<float>();
  float* scores =
      static_cast<float*>(workspace(WorkSlot::kPerThread, static_cast<size_t>(positions) * 4));
  for (int64_t h = 0; h < heads; ++h) {
    const float* q = q_all + h * hd;
    float maxv = -INFINITY;
    for (int64_t t = 0; t < positions; ++t) {
      float s = 0.0f;
      for (int64_t d = 0; d < hd; ++d) s += q[d] * kc[t * stride + h * hd + d];
      scores[t] = s * scale;
      maxv = std::fmax(maxv, scores[t]);
    }
    float sum = 0.0f;
    for (int64_t t = 0; t < positions; ++t) {
      scores[t] = std::exp(scores[t] - maxv);
      sum += scores[t];
    }
    for (int64_t d = 0; d < hd; ++d) att[h * hd + d] = 0.0f;
    for (int64_t t = 0; t < positions; ++t) {
      const float w = scores[t] / sum;
      for (int64_t d = 0; d < hd; ++d) att[h * hd + d] += w * vc[t * stride + h * hd + d];
    }
  }
}

}  // namespace ledgerlm::cpu
