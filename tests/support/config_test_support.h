// Shared by the tests that build a ModelConfig or a RunConfig by hand (model, reference, ledger,
// placement and trainer tests): the GPT shape and batch in one call, so that a test states only
// the figures it chose.
#pragma once

#include <cstdint>

#include "model/model_config.h"
#include "train/config/run_config.h"

namespace ledgerlm::testing {

// The figures of a test model in the notation of the comments: L blocks of H heads over C
// channels, a context of `block` tokens, micro-batches of B sequences of T tokens. A 0 for T or B
// keeps RunConfig's default.
struct GptShape {
  int64_t vocab = 0, L = 0, H = 0, C = 0, block = 0, T = 0, B = 0;
};

// A default ModelConfig with `s`'s shape (T and B are a run's, not the model's).
inline ModelConfig model_config_of(const GptShape& s) {
  ModelConfig m;
  m.vocab_size = s.vocab;
  m.n_layer = s.L;
  m.n_head = s.H;
  m.n_embd = s.C;
  m.block_size = s.block;
  return m;
}

// A default RunConfig with `s`'s model shape and batch.
inline RunConfig shape_config(const GptShape& s) {
  RunConfig c;
  c.model = model_config_of(s);
  if (s.T > 0) c.train.seq_len = s.T;
  if (s.B > 0) c.train.micro_batch = s.B;
  return c;
}

}  // namespace ledgerlm::testing
