// Shared pieces of the CPU attention kernel (cpu_attention.cpp has the algorithm): the shape,
// the query-block size, the per-thread scratch, and one (batch, head) pair's forward and backward
// as the kernel table (cpu_kernels.h) calls them.
#pragma once

#include <cstdint>

#include "model/backend/backend.h"

namespace ledgerlm::cpu {

// kv: heads of k and v (grouped-query attention: fewer than h; query head h reads kv head
// h / (h / kv)); a qkv row is [q: c | k: kv*hd | v: kv*hd].
struct AttnShape {
  int64_t b, t, c, h, hd, kv;
  int64_t row() const { return c + 2 * kv * hd; }
  int64_t k_col(int64_t head) const { return c + (head / (h / kv)) * hd; }
  int64_t v_col(int64_t head) const { return c + kv * hd + (head / (h / kv)) * hd; }
};

// Query rows per block: large enough for the products to run near the machine's rate, small
// enough that the masked triangle (half a block per block) stays a small share of the work.
constexpr int64_t kQueryBlock = 32;

// Per-thread scratch elements: the score/probability block, the dP/dS block, a mask row, and
// three hd x T head copies (K^T, and V or V^T and K: train/ledger/memory_plan.cpp predicts the same
// figure, change both together).
inline int64_t attention_scratch(const AttnShape& s) {
  return 2 * kQueryBlock * s.t + s.t + 3 * s.hd * s.t;
}

// One (batch, head) pair bh of the forward: writes its columns of out and its lse row. sc is the
// thread's scratch (attention_scratch elements).
struct AttnForwardHead {
  float* out;
  float* lse;
  const float* qkv;
  const AttentionArgs* args;
  AttnShape shape;
};
struct AttnBackwardHead {
  float* dqkv;
  const float* dout;
  const float* qkv;
  const float* out;
  const float* lse;
  const AttentionArgs* args;
  AttnShape shape;
};

// The BLAS-product versions (fp32 on CPUs without a vector path, and fp64 through the template
// in cpu_attention.cpp).
void attention_forward_head_blas(const AttnForwardHead& a, int64_t bh, float* scratch);
void attention_backward_head_blas(const AttnBackwardHead& a, int64_t bh, float* scratch);

}  // namespace ledgerlm::cpu
