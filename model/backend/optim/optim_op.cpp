// Backend::optimizer_ops's default: the kernels in turn, one optimizer_op each.
#include "model/backend/optim/optim_op.h"

#include "model/base/check.h"

namespace ledgerlm {

void Backend::optimizer_ops(const OptimOp* ops, int64_t count) {
  for (int64_t i = 0; i < count; ++i) {
    LLM_REQUIRE(optim_op_elementwise(ops[i].kind),
                "optimizer_ops takes element-wise kernels only (kind ",
                static_cast<int>(ops[i].kind), ")");
    optimizer_op(ops[i], nullptr);
  }
}

}  // namespace ledgerlm
