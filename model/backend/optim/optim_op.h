// One optimizer kernel over one tensor part, as the Backend runs it (Backend::optimizer_op).
// The optimizers (optim/) decide what to run — segments, per-group hyper-parameters, the phases
// around their cross-rank reductions — and hand every per-element pass to the backend, so the
// same algorithms run on any backend: the CPU backend executes the templated host loops of
// optim_kernels*.h, a device backend the same per-element functions in its kernels. Nothing
// outside a backend touches the weights, gradients or states.
//
// Per kind, what the fields mean (w: fp32 weights; g: gradients of any float dtype, multiplied by
// grad_scale on the fly; s1/s2: parameter-shaped states stored as fp32 or bf16, their dtype in the
// tensor; n elements):
//   kSgdDecay / kSgdBuf / kSgdParam / kSgdFused  s1 = momentum (empty: none)         sgd
//   kAdamWDecay / kAdamWMoments / kAdamWParam / kAdamWFused  s1 = m, s2 = v           adamw
//   kAdamW8bit   s1, s2 = codes of m, v (u8); a1, a2 = absmax per block; `block`      adamw
//   kLambMoments s1 = m, s2 = v; sums[0..1] = sum w^2, sum r^2                       lamb
//   kLambApply   s1 = m, s2 = v; w -= scale * r                                       lamb, scale
//   kLarsNorms   sums[0..1] = sum w^2, sum g^2
//   kLarsApply   s1 = momentum                                                        lars
//   kAdafactorFactoredSums  a matrix slice [p0, p0 + n) with rows of `cols`: adds row and
//                column sums of g^2 + eps1 into row_acc / col_acc (host); sums[0] = sum w^2
//   kAdafactorFactoredU2    sums[0] = sum U^2 with row_frac / col (host)
//   kAdafactorVector        s1 = v; sums[0..1] = sum w^2, sum U^2
//   kAdafactorApplyFactored s1 = m (empty: no momentum); row_frac / col (host); u_scale, alpha
//   kAdafactorApplyVector   s1 = m (optional), s2 = v; u_scale, alpha
//   kLion            s1 = m                                                           lion
//   kAdEMAMix        s1 = m1 (fast), s2 = nu, s3 = m2 (slow)                          ademamix
//   kScheduleFree    w = x; s1 = z, s2 = v; out = y (compute dtype)                   sf
//   kScheduleFreeY   w = x; s1 = z; out = y (no gradient)                             sf
//   kMuonMomentum    s1 = momentum; out = the blended update (fp32; w unused)         muon
//   kMuonApply       g = the orthogonalised update (fp32, grad_scale 1)               muon
// Sums are accumulated in double over fixed chunks: the result does not depend on threads.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "model/backend/backend.h"
#include "model/backend/optim/optim_kernels_ademamix.h"
#include "model/backend/optim/optim_kernels_lion.h"
#include "model/backend/optim/optim_kernels_muon.h"
#include "model/backend/optim/optim_kernels_schedulefree.h"
#include "model/backend/optim/optim_kernels_trust.h"
#include "model/backend/optim/optim_out_view.h"
#include "model/base/check.h"

namespace ledgerlm {

// The kernels a backend runs. Backends reach them through the one switch over the kinds,
// optim_op_visit (optim_op_visit.h), which also lists what adding a kind takes.
enum class OptimOpKind : uint8_t {
  kSgdDecay,
  kSgdBuf,
  kSgdParam,
  kSgdFused,
  kAdamWDecay,
  kAdamWMoments,
  kAdamWParam,
  kAdamWFused,
  kAdamW8bit,
  kLambMoments,
  kLambApply,
  kLarsNorms,
  kLarsApply,
  kAdafactorFactoredSums,
  kAdafactorFactoredU2,
  kAdafactorVector,
  kAdafactorApplyFactored,
  kAdafactorApplyVector,
  kLion,
  kAdEMAMix,
  kScheduleFree,
  kScheduleFreeY,
  kMuonMomentum,
  kMuonApply,
};

// Kinds that return partial sums (a reduction's input): their sums come back to the host.
inline bool optim_op_reduces(OptimOpKind k) {
  return k == OptimOpKind::kLambMoments || k == OptimOpKind::kLarsNorms ||
         k == OptimOpKind::kAdafactorFactoredSums || k == OptimOpKind::kAdafactorFactoredU2 ||
         k == OptimOpKind::kAdafactorVector;
}

struct OptimOp {
  OptimOpKind kind = OptimOpKind::kAdamWFused;
  Tensor w;  // fp32
  Tensor g;
  double grad_scale = 1.0;
  Tensor s1, s2, a1, a2;
  Tensor s3;   // a third parameter-shaped state (AdEMAMix's slow moment), s1's dtype
  Tensor out;  // an output beside the weights (kinds above say which)
  int64_t n = 0;
  int64_t block = 0;         // 8-bit quantization block
  int64_t p0 = 0, cols = 1;  // Adafactor matrix slice
  const float* row_frac = nullptr;
  const float* col = nullptr;
  double* row_acc = nullptr;
  double* col_acc = nullptr;
  SgdStep<float> sgd;
  AdamWStep<float> adamw;
  LambStep<float> lamb;
  LarsStep<float> lars;
  AdafactorStep<float> adafactor;
  LionStep<float> lion;
  AdEMAMixStep<float> ademamix;
  ScheduleFreeStep<float> schedulefree;
  MuonStep<float> muon;
  float scale = 0.0f, u_scale = 1.0f, alpha = 0.0f;
};

// fn(s1, s2) with the op's states typed as their (common) storage, fp32 or bf16 (an empty one is
// null): how a backend reaches the typed loops or kernels of a kind.
template <class Fn>
void optim_with_states(const OptimOp& op, Fn&& fn) {
  const Tensor& any = op.s1.empty() ? op.s2 : op.s1;
  if (any.empty()) {
    fn(static_cast<float*>(nullptr), static_cast<float*>(nullptr));
    return;
  }
  LLM_ASSERT(op.s1.empty() || op.s2.empty() || op.s1.dtype == op.s2.dtype,
             "optimizer states of one kernel share their storage dtype");
  optim_with_state(any.data, any.dtype, [&](auto* typed) {
    using S = std::remove_pointer_t<decltype(typed)>;
    fn(static_cast<S*>(op.s1.data), static_cast<S*>(op.s2.data));
  });
}

// Host statistics an Adafactor factored op reads or writes: the rows its slice [p0, p0 + n)
// touches plus the columns (all of them once the slice spans a row). 0 for other kinds.
inline int64_t optim_op_host_stats(const OptimOp& op) {
  const bool factored = op.kind == OptimOpKind::kAdafactorFactoredSums ||
                        op.kind == OptimOpKind::kAdafactorFactoredU2 ||
                        op.kind == OptimOpKind::kAdafactorApplyFactored;
  if (!factored || op.n <= 0 || op.cols <= 0) return 0;
  const int64_t rows = (op.p0 + op.n - 1) / op.cols - op.p0 / op.cols + 1;
  return rows + (op.n < op.cols ? op.n : op.cols);
}

// Kinds that act on each element alone (no sums, no quantization blocks, no matrix rows): a
// backend may cut them at any element and run the pieces in any order, or several ops together
// (Backend::optimizer_ops).
inline bool optim_op_elementwise(OptimOpKind k) {
  switch (k) {
    case OptimOpKind::kSgdDecay:
    case OptimOpKind::kSgdBuf:
    case OptimOpKind::kSgdParam:
    case OptimOpKind::kSgdFused:
    case OptimOpKind::kAdamWDecay:
    case OptimOpKind::kAdamWMoments:
    case OptimOpKind::kAdamWParam:
    case OptimOpKind::kAdamWFused:
    case OptimOpKind::kLion:
    case OptimOpKind::kAdEMAMix:
    case OptimOpKind::kScheduleFree:
    case OptimOpKind::kScheduleFreeY:
    case OptimOpKind::kMuonMomentum:
    case OptimOpKind::kMuonApply:
      return true;
    default:
      return false;
  }
}

// Elements [begin, begin + count) of an element-wise op: every tensor shifted, n = count.
inline OptimOp optim_op_slice(const OptimOp& op, int64_t begin, int64_t count) {
  OptimOp piece = op;
  for (Tensor* t : {&piece.w, &piece.g, &piece.s1, &piece.s2, &piece.s3, &piece.out})
    if (!t->empty()) *t = t->offset(begin);
  piece.n = count;
  return piece;
}

}  // namespace ledgerlm
