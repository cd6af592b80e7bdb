// The avx512 kernel table: the vector kernel bodies compiled for AVX-512 F/BW/VL/DQ (32 zmm
// registers).
//
// Every header outside the kernel bodies is included before the target pragma, so that no
// inline function or template of theirs is compiled for avx512 and then shared, through the
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

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_ps() internally, which trips a false
// -Wmaybe-uninitialized / -Wuninitialized once inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2")

namespace ledgerlm::cpu::avx512 {
namespace {

constexpr CpuIsa kIsa = CpuIsa::kAvx512;
#include "model/backend/cpu/cpu_vec_avx512.h"

// Attention tiles: scores 4 rows x 3 vectors (12 accumulators), combine 4 rows x 4 vectors.
constexpr int kScoreRows = 4, kScoreVecs = 3, kCombineRows = 4, kCombineVecs = 4;

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
}  // namespace ledgerlm::cpu::avx512

#pragma GCC pop_options

namespace ledgerlm::cpu {

const CpuKernels& cpu_kernels_avx512() {
  return avx512::kTable;
}

}  // namespace ledgerlm::cpu
