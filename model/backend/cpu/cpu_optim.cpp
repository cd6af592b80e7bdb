// Optimizer kernels on the CPU (see cpu_optim.h): each kind calls the stage or phase function
// of optim_kernels*.h that the optimizers called directly before they went through the backend,
// so the arithmetic — and every result bit — is theirs.
#include "model/backend/cpu/cpu_optim.h"

#include "model/backend/optim/optim_kernels_8bit.h"
#include "model/base/check.h"

namespace ledgerlm::cpu {
namespace {

void sums_store(double* sums, const std::array<double, 2>& v) {
  sums[0] = v[0];
  sums[1] = v[1];
}

#include "model/backend/cpu/cpu_optim_piece_body.h"

}  // namespace

void cpu_optimizer_piece(const OptimOp& op) {
  optim_piece(op);
}

void cpu_optimizer_check(const OptimOp& op) {
  if (!op.g.empty()) {
    const DType g = op.g.dtype;
    LLM_REQUIRE(g == DType::kF32 || g == DType::kF64 || g == DType::kBF16 || g == DType::kF16,
                "optimizer: gradients must be fp32, fp64, bf16 or fp16 (got ", dtype_name(g), ")");
  }
  for (const Tensor* s : {&op.s1, &op.s2})
    LLM_REQUIRE(s->empty() || s->dtype == DType::kF32 || s->dtype == DType::kBF16,
                "optimizer: state must be fp32 or bf16 (got ", dtype_name(s->dtype), ")");
  LLM_REQUIRE(op.s1.empty() || op.s2.empty() || op.s1.dtype == op.s2.dtype,
              "optimizer: the states of one kernel must share their storage dtype");
}

void cpu_optimizer_op(const OptimOp& op, double* sums) {
  float* w = op.w.as<float>();
  const int64_t n = op.n;
  if (op.kind == OptimOpKind::kAdamWDecay) return adamw_stage_decay(w, n, op.adamw);
  if (op.kind == OptimOpKind::kSgdDecay) return sgd_stage_decay(w, n, op.sgd);
  if (op.kind == OptimOpKind::kLambApply) {
    return optim_with_states(
        op, [&](auto* m, auto* v) { lamb_phase_apply(w, m, v, n, op.lamb, op.scale); });
  }
  if (op.kind == OptimOpKind::kAdamWParam) {
    return optim_with_states(op,
                             [&](auto* m, auto* v) { adamw_stage_param(w, m, v, n, op.adamw); });
  }
  optim_with_grad_view(op.g, op.grad_scale, [&](auto g) {
    switch (op.kind) {
      case OptimOpKind::kSgdBuf:
        return optim_with_states(op,
                                 [&](auto* buf, auto*) { sgd_stage_buf(w, buf, g, n, op.sgd); });
      case OptimOpKind::kSgdParam:
        return optim_with_states(op,
                                 [&](auto* buf, auto*) { sgd_stage_param(w, buf, g, n, op.sgd); });
      case OptimOpKind::kSgdFused:
        return optim_with_states(op, [&](auto* buf, auto*) { sgd_update(w, buf, g, n, op.sgd); });
      case OptimOpKind::kAdamWMoments:
        return optim_with_states(
            op, [&](auto* m, auto* v) { adamw_stage_moments(m, v, g, n, op.adamw); });
      case OptimOpKind::kAdamWFused:
        return optim_with_states(op,
                                 [&](auto* m, auto* v) { adamw_update(w, m, v, g, n, op.adamw); });
      case OptimOpKind::kAdamW8bit:
        return adamw8bit_update_blocks(w, op.s1.as<uint8_t>(), op.s2.as<uint8_t>(),
                                       op.a1.as<float>(), op.a2.as<float>(), g, n, op.block,
                                       op.adamw);
      case OptimOpKind::kLambMoments:
        return optim_with_states(op, [&](auto* m, auto* v) {
          sums_store(sums, lamb_phase_moments(w, m, v, g, n, op.lamb));
        });
      case OptimOpKind::kLarsNorms:
        return sums_store(sums, lars_phase_norms(w, g, n));
      case OptimOpKind::kLarsApply:
        return optim_with_states(
            op, [&](auto* buf, auto*) { lars_phase_apply(w, buf, g, n, op.lars); });
      case OptimOpKind::kAdafactorFactoredSums:
        sums[0] = adafactor_phase_factored_sums(w, g, op.p0, n, op.cols, op.adafactor, op.row_acc,
                                                op.col_acc);
        return;
      case OptimOpKind::kAdafactorFactoredU2:
        sums[0] = adafactor_phase_factored_u2(g, op.p0, n, op.cols, op.row_frac, op.col);
        return;
      case OptimOpKind::kAdafactorVector:
        return optim_with_states(op, [&](auto* v, auto*) {
          sums_store(sums, adafactor_phase_vector(w, v, g, n, op.adafactor));
        });  // s1 = v here
      case OptimOpKind::kAdafactorApplyFactored:
        return optim_with_states(op, [&](auto* m, auto*) {
          adafactor_phase_apply_factored(w, m, g, op.p0, n, op.cols, op.row_frac, op.col,
                                         op.u_scale, op.alpha, op.adafactor);
        });
      case OptimOpKind::kAdafactorApplyVector:
        return optim_with_states(op, [&](auto* m, auto* v) {
          adafactor_phase_apply_vector(w, m, v, g, n, op.u_scale, op.alpha, op.adafactor);
        });
      default:
        LLM_ASSERT(false, "optimizer op kind ", static_cast<int>(op.kind));
    }
  });
}

}  // namespace ledgerlm::cpu
