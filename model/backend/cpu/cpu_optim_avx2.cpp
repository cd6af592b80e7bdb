// cpu_optimizer_piece compiled for AVX2 (8 fp32 lanes): the optimizer passes are memory-bound,
// and the baseline build's 4-lane loops leave about a quarter of their time on the table there.
// The target deliberately leaves out FMA, so that every element sees the baseline loops'
// operations and rounding (cpu_optim_piece_body.h).
//
// Every header is included before the target pragma, so that no inline function or template of
// theirs is compiled for AVX2 and shared through the linker with code for other CPUs; the
// element functions they define are inlined into the loops below and vectorised there.
#include <cstdint>

#include "model/backend/cpu/cpu_optim.h"
#include "model/backend/optim/optim_op_visit.h"
#include "model/base/check.h"

#pragma GCC push_options
#pragma GCC target("avx2")

namespace ledgerlm::cpu::optim_avx2 {
namespace {

#include "model/backend/cpu/cpu_optim_piece_body.h"

}  // namespace

void piece(const OptimOp& op) {
  optim_piece(op);
}

}  // namespace ledgerlm::cpu::optim_avx2

#pragma GCC pop_options

namespace ledgerlm::cpu {

void cpu_optimizer_piece_avx2(const OptimOp& op) {
  optim_avx2::piece(op);
}

}  // namespace ledgerlm::cpu
