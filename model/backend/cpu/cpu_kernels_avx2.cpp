// The avx2 kernel table: the vector kernel bodies compiled for AVX2 + FMA + F16C (16 ymm
// registers).
//
// Every header outside the kernel bodies is included before the target pragma, so that no
// inline function or template of theirs is compiled for avx2 and then shared, through the
// linker, with code that runs on CPUs without it. The bodies live in this unit's own namespace.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "model/backend/common/op_constants.h"
#include "model/backend/common/random_keys.h"
#include "model/backend/cpu/cpu_attention.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/base/dtype.h"

#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")

namespace ledgerlm::cpu::avx2 {
namespace {

constexpr CpuIsa kIsa = CpuIsa::kAvx2;
#include "model/backend/cpu/cpu_vec_avx2.h"

// Attention tiles: scores 4 rows x 3 vectors (12 accumulators), combine 3 rows x 4 vectors
// (12 accumulators; head_dim 64 is two such column tiles). On a Zen 3 the combine's 3 x 4 ran
// 8-10% faster per attention call than 4 x 2 (8 accumulators) and 6 x 2.
constexpr int kScoreRows = 4, kScoreVecs = 3, kCombineRows = 3, kCombineVecs = 4;

// In this order: each body uses the ones before it.
#include "model/backend/cpu/cpu_kernels_body.h"
// (SwiGLU on vexp)
#include "model/backend/cpu/cpu_mlp_act_body.h"
// (the logit soft-cap on vexp)
#include "model/backend/cpu/cpu_softcap_body.h"
// (the tiles and their products policy)
#include "model/backend/cpu/cpu_attention_tiles_body.h"
// (the per-head algorithm over that policy)
#include "model/backend/cpu/cpu_attention_head.h"
// (layernorm rows as plain loops, vectorised for this target)
#include "model/backend/cpu/cpu_layernorm_rows.h"
// (RMSNorm rows and ReLU squared, likewise)
#include "model/backend/cpu/cpu_mlp_act_loops.h"
#include "model/backend/cpu/cpu_rmsnorm_rows.h"
// (the table of everything above)
#include "model/backend/cpu/cpu_kernels_table_body.h"

}  // namespace
}  // namespace ledgerlm::cpu::avx2

#pragma GCC pop_options

namespace ledgerlm::cpu {

const CpuKernels& cpu_kernels_avx2() {
  return avx2::kTable;
}

}  // namespace ledgerlm::cpu
