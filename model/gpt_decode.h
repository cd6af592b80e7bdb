// Incremental decoding with a KV cache: one token at a time, each block's keys and values of
// earlier positions kept, so a new token costs O(context) instead of a whole forward. Uses the
// backend for every matrix op; the single-query attention over the cache is done here.
#pragma once

#include <cstdint>
#include <vector>

#include "model/backend/backend.h"
#include "model/model_config.h"
#include "model/param_refs.h"
#include "model/param_table.h"

namespace ledgerlm {

class GptDecoder {
 public:
  // params: fp32 flat buffer laid out by `table` (must outlive the decoder).
  GptDecoder(const ModelConfig& config, const ParamTable& table, Backend& backend,
             const float* params);
  void reset();  // forget the cache
  int64_t length() const { return length_; }
  // Appends `token` at position length() and returns the logits of the next token
  // ([padded_vocab], only the first vocab_size meaningful). Requires length() < block_size.
  const float* step(int32_t token);

 private:
  const ModelConfig& cfg_;
  const ParamTable& table_;
  Backend& be_;
  const float* params_;
  int64_t length_ = 0;
  std::vector<float> k_cache_, v_cache_;  // [L, block_size, C]
  std::vector<float> x_, ln_, qkv_, att_, proj_, fch_, fcg_, logits_, mean_, rstd_, scores_;
  // Flat-buffer offsets of the tensors, resolved once (param_refs.h).
  int64_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0;
  std::vector<BlockOffsets> blocks_;
  Tensor p(int64_t offset) const;
};

}  // namespace ledgerlm
