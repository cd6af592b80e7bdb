// Newton–Schulz through Backend ops (see muon_newton_schulz.h).
#include "optim/muon_newton_schulz.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace ledgerlm {

void newton_schulz(Backend& be, Tensor x, int64_t rows, int64_t cols, int steps, double eps,
                   const NewtonSchulzWork& work) {
  const int64_t n = rows * cols;
  const bool tall = rows > cols;
  const int64_t k = tall ? cols : rows;  // the Gram matrices' side
  const double norm = std::sqrt(be.sum_squares(x, n));
  be.scale(x, n, 1.0 / std::max(norm, eps));
  Tensor cur = x, next = work.other;
  for (int s = 0; s < steps; ++s) {
    GemmArgs gram;  // A = X X^T (wide) or X^T X (tall)
    gram.a = cur;
    gram.b = cur;
    gram.c = work.gram;
    gram.m = gram.n = k;
    gram.k = tall ? rows : cols;
    gram.trans_a = tall;
    gram.trans_b = !tall;
    be.gemm(gram);
    GemmArgs square;  // B = c A A + b A
    square.a = work.gram;
    square.b = work.gram;
    square.c = work.gram2;
    square.m = square.n = square.k = k;
    be.gemm(square);
    be.scale(work.gram2, k * k, kMuonNsC);
    be.scale(work.gram, k * k, kMuonNsB);
    be.add(work.gram2, work.gram2, work.gram, k * k);
    GemmArgs apply;  // next = B X (wide) or X B^T (tall); then next += a X
    apply.c = next;
    apply.m = rows;
    apply.n = cols;
    if (tall) {
      apply.a = cur;
      apply.b = work.gram2;
      apply.k = cols;
      apply.trans_b = true;
    } else {
      apply.a = work.gram2;
      apply.b = cur;
      apply.k = rows;
    }
    be.gemm(apply);
    be.scale(cur, n, kMuonNsA);
    be.add(next, next, cur, n);
    std::swap(cur, next);
  }
  if (cur.data != x.data) be.copy(x, cur, n);
}

}  // namespace ledgerlm
