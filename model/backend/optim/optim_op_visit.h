// The one switch over OptimOpKind. A backend runs an optimizer kernel by handing the OptimOp and
// a visitor to optim_op_visit: the op's states are typed as their storage (float or StateBF16),
// its gradients as the fp32 view of their dtype (optim_kernels.h), and the visitor's method for
// the op's kind is called with the typed arrays and the fields that kind reads. The visitors are
// the backends' kernels: the CPU's whole-tensor loops (cpu_optim.cpp), its vectorised pieces
// (cpu_optim_piece_body.h) and the CUDA launches (cuda_optim.cu).
//
// Adding a kind: its enumerator and properties in optim_op.h (optim_op_elementwise,
// optim_op_reduces), one case below, and a method of that name in each visitor that runs it.
//
// Visitor methods, per kind (w: fp32 weights; S*: a state array; G: a gradient view; n elements):
//   element-wise (optim_op_visit_elementwise):
//     sgd_decay(w, n, sgd)                 adamw_decay(w, n, adamw)
//     sgd_buf(w, S* buf, g, n, sgd)        adamw_moments(S* m, S* v, g, n, adamw)
//     sgd_param(w, S* buf, g, n, sgd)      adamw_param(w, S* m, S* v, n, adamw)
//     sgd_fused(w, S* buf, g, n, sgd)      adamw_fused(w, S* m, S* v, g, n, adamw)
//     lion(w, S* m, g, n, lion)            ademamix(w, S* m1, S* nu, S* m2, g, n, ademamix)
//     schedulefree(w, S* z, S* v, g, O y, n, sf)    schedulefree_y(w, S* z, O y, n, sf)
//     muon_momentum(S* buf, g, OutF32 u, n, muon)   muon_apply(w, g, n, muon)
//   (O: an output view of optim_out_view.h, typed as op.out's dtype)
//   the others (optim_op_visit):
//     adamw8bit(w, u8* codes_m, u8* codes_v, float* absmax_m, float* absmax_v, g, n, block, adamw)
//     lamb_moments(w, S* m, S* v, g, n, lamb)          lamb_apply(w, S* m, S* v, n, lamb, scale)
//     lars_norms(w, g, n)                              lars_apply(w, S* buf, g, n, lars)
//     adafactor_factored_sums(w, g, p0, n, cols, adafactor, row_acc, col_acc)
//     adafactor_factored_u2(g, p0, n, cols, row_frac, col)
//     adafactor_vector(w, S* v, g, n, adafactor)
//     adafactor_apply_factored(w, S* m, g, p0, n, cols, row_frac, col, u_scale, alpha, adafactor)
//     adafactor_apply_vector(w, S* m, S* v, g, n, u_scale, alpha, adafactor)
// An empty state reaches the visitor as a null float* (sgd without momentum, Adafactor without
// its first moment). Kinds that reduce leave their sums to the visitor (it holds the output).
#pragma once

#include <cstdint>
#include <type_traits>

#include "model/backend/optim/optim_op.h"
#include "model/base/check.h"

namespace ledgerlm {

// The element-wise kinds only (optim_op_elementwise): a visitor for pieces of a pass (the CPU's
// vectorised loops) needs no method for the others.
template <class V>
void optim_op_visit_elementwise(const OptimOp& op, V&& v) {
  float* w = op.w.as<float>();
  const int64_t n = op.n;
  switch (op.kind) {  // the kinds that read no gradient
    case OptimOpKind::kSgdDecay:
      return v.sgd_decay(w, n, op.sgd);
    case OptimOpKind::kAdamWDecay:
      return v.adamw_decay(w, n, op.adamw);
    case OptimOpKind::kAdamWParam:
      return optim_with_states(op,
                               [&](auto* m, auto* s2) { v.adamw_param(w, m, s2, n, op.adamw); });
    case OptimOpKind::kScheduleFreeY:
      return optim_with_out(op.out, [&](auto y) {
        optim_with_states(op,
                          [&](auto* z, auto*) { v.schedulefree_y(w, z, y, n, op.schedulefree); });
      });
    default:
      break;
  }
  LLM_ASSERT(optim_op_elementwise(op.kind), "optimizer op kind ", static_cast<int>(op.kind),
             " is not element-wise");
  optim_with_grad_view(op.g, op.grad_scale, [&](auto g) {
    switch (op.kind) {
      case OptimOpKind::kSgdBuf:
        return optim_with_states(op, [&](auto* buf, auto*) { v.sgd_buf(w, buf, g, n, op.sgd); });
      case OptimOpKind::kSgdParam:
        return optim_with_states(op, [&](auto* buf, auto*) { v.sgd_param(w, buf, g, n, op.sgd); });
      case OptimOpKind::kSgdFused:
        return optim_with_states(op, [&](auto* buf, auto*) { v.sgd_fused(w, buf, g, n, op.sgd); });
      case OptimOpKind::kAdamWMoments:
        return optim_with_states(
            op, [&](auto* m, auto* s2) { v.adamw_moments(m, s2, g, n, op.adamw); });
      case OptimOpKind::kAdamWFused:
        return optim_with_states(
            op, [&](auto* m, auto* s2) { v.adamw_fused(w, m, s2, g, n, op.adamw); });
      case OptimOpKind::kLion:
        return optim_with_states(op, [&](auto* m, auto*) { v.lion(w, m, g, n, op.lion); });
      case OptimOpKind::kAdEMAMix:  // s3 (the slow moment) shares s1's storage
        LLM_ASSERT(op.s3.dtype == op.s1.dtype, "AdEMAMix's moments share their storage dtype");
        return optim_with_states(op, [&](auto* m1, auto* nu) {
          using S = std::remove_pointer_t<decltype(m1)>;
          v.ademamix(w, m1, nu, static_cast<S*>(op.s3.data), g, n, op.ademamix);
        });
      case OptimOpKind::kScheduleFree:
        return optim_with_out(op.out, [&](auto y) {
          optim_with_states(
              op, [&](auto* z, auto* s2) { v.schedulefree(w, z, s2, g, y, n, op.schedulefree); });
        });
      case OptimOpKind::kMuonMomentum:
        LLM_ASSERT(op.out.dtype == DType::kF32, "Muon's blended update is fp32");
        return optim_with_states(op, [&](auto* buf, auto*) {
          v.muon_momentum(buf, g, OutF32{op.out.as<float>()}, n, op.muon);
        });
      case OptimOpKind::kMuonApply:
        return v.muon_apply(w, g, n, op.muon);
      default:
        LLM_ASSERT(false, "optimizer op kind ", static_cast<int>(op.kind));
    }
  });
}

// Every kind.
template <class V>
void optim_op_visit(const OptimOp& op, V&& v) {
  if (optim_op_elementwise(op.kind)) return optim_op_visit_elementwise(op, v);
  float* w = op.w.as<float>();
  const int64_t n = op.n;
  if (op.kind == OptimOpKind::kLambApply) {  // reads no gradient
    return optim_with_states(
        op, [&](auto* m, auto* s2) { v.lamb_apply(w, m, s2, n, op.lamb, op.scale); });
  }
  optim_with_grad_view(op.g, op.grad_scale, [&](auto g) {
    switch (op.kind) {
      case OptimOpKind::kAdamW8bit:  // states are 8-bit codes with a scale per block
        return v.adamw8bit(w, op.s1.as<uint8_t>(), op.s2.as<uint8_t>(), op.a1.as<float>(),
                           op.a2.as<float>(), g, n, op.block, op.adamw);
      case OptimOpKind::kLambMoments:
        return optim_with_states(
            op, [&](auto* m, auto* s2) { v.lamb_moments(w, m, s2, g, n, op.lamb); });
      case OptimOpKind::kLarsNorms:
        return v.lars_norms(w, g, n);
      case OptimOpKind::kLarsApply:
        return optim_with_states(op,
                                 [&](auto* buf, auto*) { v.lars_apply(w, buf, g, n, op.lars); });
      case OptimOpKind::kAdafactorFactoredSums:
        return v.adafactor_factored_sums(w, g, op.p0, n, op.cols, op.adafactor, op.row_acc,
                                         op.col_acc);
      case OptimOpKind::kAdafactorFactoredU2:
        return v.adafactor_factored_u2(g, op.p0, n, op.cols, op.row_frac, op.col);
      case OptimOpKind::kAdafactorVector:  // s1 = v
        return optim_with_states(
            op, [&](auto* s1, auto*) { v.adafactor_vector(w, s1, g, n, op.adafactor); });
      case OptimOpKind::kAdafactorApplyFactored:
        return optim_with_states(op, [&](auto* m, auto*) {
          v.adafactor_apply_factored(w, m, g, op.p0, n, op.cols, op.row_frac, op.col, op.u_scale,
                                     op.alpha, op.adafactor);
        });
      case OptimOpKind::kAdafactorApplyVector:
        return optim_with_states(op, [&](auto* m, auto* s2) {
          v.adafactor_apply_vector(w, m, s2, g, n, op.u_scale, op.alpha, op.adafactor);
        });
      default:
        LLM_ASSERT(false, "optimizer op kind ", static_cast<int>(op.kind));
    }
  });
}

}  // namespace ledgerlm
