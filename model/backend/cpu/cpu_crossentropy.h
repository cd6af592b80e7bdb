// The entry checks the CPU's two softmax cross-entropy ops share (cpu_crossentropy.cpp,
// cpu_softcap.cpp), made before any parallel region.
#pragma once

#include <cstdint>

#include "model/backend/backend.h"

namespace ledgerlm::cpu {

// Checks `losses` (act dtype), the int32 targets (each in [0, vocab)) and 0 < vocab <=
// padded_vocab, naming `op` in the error; returns the targets (null only when rows == 0).
const int32_t* require_cross_entropy_args(const char* op, Tensor losses, DType act,
                                          Tensor target_ids, int64_t rows, int64_t vocab,
                                          int64_t padded_vocab);

}  // namespace ledgerlm::cpu
