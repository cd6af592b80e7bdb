// Muon's orthogonalisation of one matrix's update, run through Backend ops (GEMMs, a sum of
// squares, scales and adds) so that every backend runs it, and no host loop touches the data:
//   X = U / max(||U||_F, eps)
//   ns_steps times:  A = X X^T;  B = b A + c A A;  X = a X + B X      (a, b, c) = (3.4445,
//   -4.7750, 2.0315)
// the quintic iteration of Jordan et al., whose fixed point pushes every singular value into
// ~[0.7, 1.2] (not exactly 1: the result is only approximately orthogonal). A tall matrix (rows >
// cols) is iterated as its transpose, written here without a transposed copy: A = X^T X and
// X = a X + X B^T. Computed in fp32 (torch.optim.Muon casts to bf16 first; see docs/optimizers.md).
#pragma once

#include <cstdint>

#include "model/backend/backend.h"

namespace ledgerlm {

inline constexpr double kMuonNsA = 3.4445, kMuonNsB = -4.7750, kMuonNsC = 2.0315;

// Work buffers for one (rows, cols) matrix, fp32: `other` of rows*cols elements, `gram` and
// `gram2` of min(rows, cols)^2 each.
struct NewtonSchulzWork {
  Tensor other, gram, gram2;
};

// Orthogonalises x [rows, cols] (fp32, row-major) in place.
void newton_schulz(Backend& backend, Tensor x, int64_t rows, int64_t cols, int steps, double eps,
                   const NewtonSchulzWork& work);

}  // namespace ledgerlm
