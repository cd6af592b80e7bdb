// Folding low-rank adapters into their base weights: W' = W + (alpha / rank) B A. Evaluation,
// sampling and export of a LoRA run use the merged weights, so they run the plain GPT-2 (and an
// exported model loads anywhere GPT-2 does).
#pragma once

#include <cstdint>
#include <vector>

namespace ledgerlm {

// w (out, in) += scale * b (out, rank) a (rank, in), each sum formed in double and rounded once.
void lora_merge(std::vector<float>* w, const std::vector<float>& a, const std::vector<float>& b,
                int64_t out, int64_t in, int64_t rank, double scale);

}  // namespace ledgerlm
