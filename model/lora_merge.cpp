// LoRA merge (see lora_merge.h).
#include "model/lora_merge.h"

#include "model/base/check.h"

namespace ledgerlm {

void lora_merge(std::vector<float>* w, const std::vector<float>& a, const std::vector<float>& b,
                int64_t out, int64_t in, int64_t rank, double scale) {
  LLM_REQUIRE(
      static_cast<int64_t>(w->size()) == out * in && static_cast<int64_t>(a.size()) == rank * in &&
          static_cast<int64_t>(b.size()) == out * rank,
      "lora merge: factor shapes do not match the weight (", out, " x ", in, ", rank ", rank, ")");
  std::vector<double> row(static_cast<size_t>(in));
  for (int64_t o = 0; o < out; ++o) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t k = 0; k < rank; ++k) {
      const double bk = b[static_cast<size_t>(o * rank + k)];
      const float* ak = a.data() + k * in;
      for (int64_t i = 0; i < in; ++i) row[static_cast<size_t>(i)] += bk * ak[i];
    }
    float* wo = w->data() + o * in;
    for (int64_t i = 0; i < in; ++i)
      wo[i] = static_cast<float>(static_cast<double>(wo[i]) + scale * row[static_cast<size_t>(i)]);
  }
}

}  // namespace ledgerlm
