// Optimizer kernels on the CPU (see cpu_optim.h): each kind calls the stage or phase function
// of optim_kernels*.h that the optimizers called directly before they went through the backend,
// so the arithmetic — and every result bit — is theirs.
#include "model/backend/cpu/cpu_optim.h"

#include <type_traits>

#include "model/backend/optim_kernels_8bit.h"
#include "model/base/check.h"

namespace ledgerlm::cpu {
namespace {

// s1 and s2 typed as their (common) storage, fp32 or bf16; an empty one is null.
template <class Fn>
void with_states(const OptimOp& op, Fn&& fn) {
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

void sums_store(double* sums, const std::array<double, 2>& v) {
  sums[0] = v[0];
  sums[1] = v[1];
}

}  // namespace

void cpu_optimizer_op(const OptimOp& op, double* sums) {
  float* w = op.w.as<float>();
  const int64_t n = op.n;
  if (op.kind == OptimOpKind::kAdamWDecay) return adamw_stage_decay(w, n, op.adamw);
  if (op.kind == OptimOpKind::kSgdDecay) return sgd_stage_decay(w, n, op.sgd);
  if (op.kind == OptimOpKind::kLambApply) {
    return with_states(op,
                       [&](auto* m, auto* v) { lamb_phase_apply(w, m, v, n, op.lamb, op.scale); });
  }
  if (op.kind == OptimOpKind::kAdamWParam) {
    return with_states(op, [&](auto* m, auto* v) { adamw_stage_param(w, m, v, n, op.adamw); });
  }
  optim_with_grad_view(op.g, op.grad_scale, [&](auto g) {
    switch (op.kind) {
      case OptimOpKind::kSgdBuf:
        return with_states(op, [&](auto* buf, auto*) { sgd_stage_buf(w, buf, g, n, op.sgd); });
      case OptimOpKind::kSgdParam:
        return with_states(op, [&](auto* buf, auto*) { sgd_stage_param(w, buf, g, n, op.sgd); });
      case OptimOpKind::kSgdFused:
        return with_states(op, [&](auto* buf, auto*) { sgd_update(w, buf, g, n, op.sgd); });
      case OptimOpKind::kAdamWMoments:
        return with_states(op,
                           [&](auto* m, auto* v) { adamw_stage_moments(m, v, g, n, op.adamw); });
      case OptimOpKind::kAdamWFused:
        return with_states(op, [&](auto* m, auto* v) { adamw_update(w, m, v, g, n, op.adamw); });
      case OptimOpKind::kAdamW8bit:
        return adamw8bit_update_blocks(w, op.s1.as<uint8_t>(), op.s2.as<uint8_t>(),
                                       op.a1.as<float>(), op.a2.as<float>(), g, n, op.block,
                                       op.adamw);
      case OptimOpKind::kLambMoments:
        return with_states(op, [&](auto* m, auto* v) {
          sums_store(sums, lamb_phase_moments(w, m, v, g, n, op.lamb));
        });
      case OptimOpKind::kLarsNorms:
        return sums_store(sums, lars_phase_norms(w, g, n));
      case OptimOpKind::kLarsApply:
        return with_states(op, [&](auto* buf, auto*) { lars_phase_apply(w, buf, g, n, op.lars); });
      case OptimOpKind::kAdafactorFactoredSums:
        sums[0] = adafactor_phase_factored_sums(w, g, op.p0, n, op.cols, op.adafactor, op.row_acc,
                                                op.col_acc);
        return;
      case OptimOpKind::kAdafactorFactoredU2:
        sums[0] = adafactor_phase_factored_u2(g, op.p0, n, op.cols, op.row_frac, op.col);
        return;
      case OptimOpKind::kAdafactorVector:
        return with_states(op, [&](auto* v, auto*) {
          sums_store(sums, adafactor_phase_vector(w, v, g, n, op.adafactor));
        });  // s1 = v here
      case OptimOpKind::kAdafactorApplyFactored:
        return with_states(op, [&](auto* m, auto*) {
          adafactor_phase_apply_factored(w, m, g, op.p0, n, op.cols, op.row_frac, op.col,
                                         op.u_scale, op.alpha, op.adafactor);
        });
      case OptimOpKind::kAdafactorApplyVector:
        return with_states(op, [&](auto* m, auto* v) {
          adafactor_phase_apply_vector(w, m, v, g, n, op.u_scale, op.alpha, op.adafactor);
        });
      default:
        LLM_ASSERT(false, "optimizer op kind ", static_cast<int>(op.kind));
    }
  });
}

}  // namespace ledgerlm::cpu
