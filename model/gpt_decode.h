// Incremental decoding with a KV cache: one token at a time, each block's keys and values of
// earlier positions kept, so a new token costs O(context) instead of a whole forward. Each block
// runs the training forward's own code (gpt_block.h) on one row, with attention over the cache.
// Every matrix op and the single-query attention over the cache run on the backend, in its memory;
// only the next token's logits come back to the host.
#pragma once

#include <cstdint>
#include <vector>

#include "model/backend/backend.h"
#include "model/gpt_block.h"
#include "model/model_config.h"
#include "model/param_refs.h"
#include "model/param_table.h"

namespace ledgerlm {

class GptDecoder {
 public:
  // params: fp32 flat buffer in the backend's memory laid out by `table` (must outlive the
  // decoder).
  GptDecoder(const ModelConfig& config, const ParamTable& table, Backend& backend, Tensor params);
  void reset();  // forget the cache
  int64_t length() const { return length_; }
  // Appends `token` at position length() and returns the logits of the next token (host memory,
  // [padded_vocab], only the first vocab_size meaningful). Requires length() < block_size.
  const float* step(int32_t token);

 private:
  Tensor p(int64_t offset) const { return params_.offset(offset); }

  const ModelConfig& cfg_;
  Backend& be_;
  Tensor params_;
  int64_t length_ = 0;
  Buffer cache_;              // k then v: [L, block_size, KV heads x head_dim] each
  Buffer work_;               // the one-token activations below
  Tensor k_, v_;              // into cache_
  Tensor x_, proj_, logits_;  // into work_
  BlockActs acts_;            // into work_: one block's activations, reused by every block
  BlockWidths widths_;
  std::vector<float> host_logits_;
  // Flat-buffer offsets of the tensors, resolved once (param_refs.h).
  int64_t wte_ = 0, wpe_ = 0, lnfw_ = 0, lnfb_ = 0;  // wpe_: -1 with rotary positions
  int64_t head_ = 0;  // the head's weight: wte_, or the untied lm_head
  std::vector<BlockOffsets> blocks_;
};

}  // namespace ledgerlm
