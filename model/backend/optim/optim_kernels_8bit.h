// 8-bit AdamW's per-block update (arXiv 2110.02861): decode a block of m and v from their dynamic
// map codes, run the fp32 AdamW arithmetic of optim_kernels.h, re-encode; blocks are independent.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/backend/optim/optim_kernels.h"
#include "model/backend/optim/quant8.h"

namespace ledgerlm {

// One element: m and v (decoded) updated in place, then the weight.
LLM_HD inline void adamw8bit_elem(float& w, float& m, float& v, float g,
                                  const AdamWStep<float>& s) {
  const float mi = adamw_elem_m(m, g, s);
  const float vi = adamw_elem_v(v, g, s);
  m = mi;
  v = vi;
  w = adamw_elem_param(w * s.decay, mi, vi, s);
}

template <class G>
void adamw8bit_update_blocks(float* w, uint8_t* codes_m, uint8_t* codes_v, float* absmax_m,
                             float* absmax_v, const G& g, int64_t n, int64_t block,
                             const AdamWStep<float>& s) {
  const int64_t blocks = (n + block - 1) / block;
  const QuantMap& sm = quant_map_signed();
  const QuantMap& um = quant_map_unsigned();
#pragma omp parallel if (n >= kOptimParallelMin)
  {
    std::vector<float> mb(static_cast<size_t>(block)), vb(static_cast<size_t>(block));
#pragma omp for schedule(static)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t i0 = b * block, len = std::min(block, n - i0);
      quant_block_decode(sm, codes_m + i0, len, absmax_m[b], mb.data());
      quant_block_decode(um, codes_v + i0, len, absmax_v[b], vb.data());
      for (int64_t i = 0; i < len; ++i) adamw8bit_elem(w[i0 + i], mb[i], vb[i], g[i0 + i], s);
      quant_block_encode(sm, mb.data(), len, codes_m + i0, &absmax_m[b]);
      quant_block_encode(um, vb.data(), len, codes_v + i0, &absmax_v[b]);
    }
  }
}

}  // namespace ledgerlm
