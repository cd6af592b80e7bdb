// GPT-2 architecture settings: the [model] section of a config.
#pragma once

#include <cstdint>
#include <string>

namespace ledgerlm {

enum class Recompute : uint8_t { kNone, kMlp, kBlock };
const char* recompute_name(Recompute r);
Recompute recompute_parse(const std::string& text);  // throws Error naming model.recompute

struct ModelConfig {
  int64_t vocab_size = 0;  // 0: taken from the prepared data (meta.json)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 256;        // context length: the longest sequence the model accepts
  double dropout = 0.0;            // attention and residual dropout probability
  std::string recompute = "none";  // none | mlp | block (activation checkpointing)

  int64_t head_dim() const { return n_embd / n_head; }
  // Vocab rounded up to a multiple of 64 for GEMM shape; padded logits get no probability mass.
  int64_t padded_vocab() const { return (vocab_size + 63) / 64 * 64; }
  // Throws Error naming the offending key ("model.n_head ...").
  void validate() const;
};

}  // namespace ledgerlm
