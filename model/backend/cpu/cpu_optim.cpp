// Optimizer kernels on the CPU (see cpu_optim.h): each kind calls the stage or phase function
// of optim_kernels*.h that the optimizers called directly before they went through the backend,
// so the arithmetic — and every result bit — is theirs. optim_op_visit picks the kind and types
// the arrays; WholeTensor holds the calls.
#include "model/backend/cpu/cpu_optim.h"

#include "model/backend/optim/optim_kernels_8bit.h"
#include "model/backend/optim/optim_op_visit.h"
#include "model/base/check.h"

namespace ledgerlm::cpu {
namespace {

void sums_store(double* sums, const std::array<double, 2>& v) {
  sums[0] = v[0];
  sums[1] = v[1];
}

#include "model/backend/cpu/cpu_optim_piece_body.h"

// The visitor of cpu_optimizer_op: one kind over the whole tensor, in its stage or phase
// function's own (parallel) loops. The element-wise kinds without such a function (Lion,
// AdEMAMix, Schedule-Free, Muon's halves) are PieceLoops' serial loops: CpuBackend runs those
// kinds through optimizer_ops' pieces, never here.
struct WholeTensor : PieceLoops {
  double* sums;  // kinds that reduce write here

  void sgd_decay(float* w, int64_t n, const SgdStep<float>& s) const { sgd_stage_decay(w, n, s); }
  template <class S, class G>
  void sgd_buf(float* w, S* buf, const G& g, int64_t n, const SgdStep<float>& s) const {
    sgd_stage_buf(w, buf, g, n, s);
  }
  template <class S, class G>
  void sgd_param(float* w, S* buf, const G& g, int64_t n, const SgdStep<float>& s) const {
    sgd_stage_param(w, buf, g, n, s);
  }
  template <class S, class G>
  void sgd_fused(float* w, S* buf, const G& g, int64_t n, const SgdStep<float>& s) const {
    sgd_update(w, buf, g, n, s);
  }
  void adamw_decay(float* w, int64_t n, const AdamWStep<float>& s) const {
    adamw_stage_decay(w, n, s);
  }
  template <class S, class G>
  void adamw_moments(S* m, S* v, const G& g, int64_t n, const AdamWStep<float>& s) const {
    adamw_stage_moments(m, v, g, n, s);
  }
  template <class S>
  void adamw_param(float* w, S* m, S* v, int64_t n, const AdamWStep<float>& s) const {
    adamw_stage_param(w, m, v, n, s);
  }
  template <class S, class G>
  void adamw_fused(float* w, S* m, S* v, const G& g, int64_t n, const AdamWStep<float>& s) const {
    adamw_update(w, m, v, g, n, s);
  }
  template <class G>
  void adamw8bit(float* w, uint8_t* codes_m, uint8_t* codes_v, float* absmax_m, float* absmax_v,
                 const G& g, int64_t n, int64_t block, const AdamWStep<float>& s) const {
    adamw8bit_update_blocks(w, codes_m, codes_v, absmax_m, absmax_v, g, n, block, s);
  }
  template <class S, class G>
  void lamb_moments(float* w, S* m, S* v, const G& g, int64_t n, const LambStep<float>& s) const {
    sums_store(sums, lamb_phase_moments(w, m, v, g, n, s));
  }
  template <class S>
  void lamb_apply(float* w, S* m, S* v, int64_t n, const LambStep<float>& s, float scale) const {
    lamb_phase_apply(w, m, v, n, s, scale);
  }
  template <class G>
  void lars_norms(float* w, const G& g, int64_t n) const {
    sums_store(sums, lars_phase_norms(w, g, n));
  }
  template <class S, class G>
  void lars_apply(float* w, S* buf, const G& g, int64_t n, const LarsStep<float>& s) const {
    lars_phase_apply(w, buf, g, n, s);
  }
  template <class G>
  void adafactor_factored_sums(float* w, const G& g, int64_t p0, int64_t n, int64_t cols,
                               const AdafactorStep<float>& s, double* row_acc,
                               double* col_acc) const {
    sums[0] = adafactor_phase_factored_sums(w, g, p0, n, cols, s, row_acc, col_acc);
  }
  template <class G>
  void adafactor_factored_u2(const G& g, int64_t p0, int64_t n, int64_t cols, const float* row_frac,
                             const float* col) const {
    sums[0] = adafactor_phase_factored_u2(g, p0, n, cols, row_frac, col);
  }
  template <class S, class G>
  void adafactor_vector(float* w, S* v, const G& g, int64_t n,
                        const AdafactorStep<float>& s) const {
    sums_store(sums, adafactor_phase_vector(w, v, g, n, s));
  }
  template <class S, class G>
  void adafactor_apply_factored(float* w, S* m, const G& g, int64_t p0, int64_t n, int64_t cols,
                                const float* row_frac, const float* col, float u_scale, float alpha,
                                const AdafactorStep<float>& s) const {
    adafactor_phase_apply_factored(w, m, g, p0, n, cols, row_frac, col, u_scale, alpha, s);
  }
  template <class S, class G>
  void adafactor_apply_vector(float* w, S* m, S* v, const G& g, int64_t n, float u_scale,
                              float alpha, const AdafactorStep<float>& s) const {
    adafactor_phase_apply_vector(w, m, v, g, n, u_scale, alpha, s);
  }
};

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
  optim_op_visit(op, WholeTensor{{}, sums});
}

}  // namespace ledgerlm::cpu
