// Constants that fix what the backends' ops compute, and in which order they sum: the CPU and
// CUDA backends take them from here so that they cannot drift apart.
#pragma once

#include <cstdint>

namespace ledgerlm {

// Whole-buffer loops and reductions (sum, sum_squares, all_finite, ...) cut a buffer into chunks
// of this many elements, independent of the thread or block count, and add the chunks' partial
// sums in chunk order: the result does not depend on how many threads ran, and the CUDA sums
// differ from the CPU's only by the rounding of the sums inside a chunk.
constexpr int64_t kBufferChunk = int64_t{1} << 15;

// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
constexpr double kGeluSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

// LayerNorm: rstd = 1 / sqrt(var + eps) (backend.h).
constexpr double kLayerNormEps = 1e-5;

}  // namespace ledgerlm
