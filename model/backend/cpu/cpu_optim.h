// The CPU implementation of Backend::optimizer_op: the templated host loops of
// optim_kernels*.h, dispatched on the kernel kind, the state storage and the gradient dtype.
// Free functions so that host-memory test backends can run the same code.
#pragma once

#include <type_traits>

#include "model/backend/optim_op.h"
#include "model/base/check.h"

namespace ledgerlm::cpu {

void cpu_optimizer_op(const OptimOp& op, double* sums);

// One piece of an element-wise kernel (optim_op_elementwise: the op as optim_op_slice cuts it),
// serially, with exactly cpu_optimizer_op's results: in the baseline ISA, or compiled for AVX2
// (call it only where the CPU has AVX2). CpuBackend runs the pieces of a whole optimizer pass
// in one parallel region.
void cpu_optimizer_piece(const OptimOp& op);
void cpu_optimizer_piece_avx2(const OptimOp& op);

// Checks what the kernels would reject (gradient and state dtypes) before a parallel region
// runs them: an error inside one cannot be reported.
void cpu_optimizer_check(const OptimOp& op);

// fn(s1, s2) with the states typed as their (common) storage, fp32 or bf16; an empty one is null.
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

}  // namespace ledgerlm::cpu
