// The CPU implementation of Backend::optimizer_op: the templated host loops of
// optim_kernels*.h, dispatched on the kernel kind, the state storage and the gradient dtype.
// A free function so that host-memory test backends can run the same code.
#pragma once

#include "model/backend/optim_op.h"

namespace ledgerlm::cpu {

void cpu_optimizer_op(const OptimOp& op, double* sums);

}  // namespace ledgerlm::cpu
