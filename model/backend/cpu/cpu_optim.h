// The CPU implementation of Backend::optimizer_op: the templated host loops of
// optim_kernels*.h, dispatched on the kernel kind, the state storage and the gradient dtype.
// Free functions so that host-memory test backends can run the same code.
#pragma once

#include "model/backend/optim/optim_op.h"

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

}  // namespace ledgerlm::cpu
