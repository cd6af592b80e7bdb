// Outputs an optimizer kernel writes besides the weights and its states: Schedule-Free's training
// point y, stored into the compute copy in the compute dtype (rounded to nearest even), and
// Muon's blended momentum, stored in fp32 for the orthogonalisation. put(i, x) stores x at i.
#pragma once

#include <cstdint>

#include "model/backend/backend.h"
#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/base/hd.h"

namespace ledgerlm {

struct OutF32 {
  float* p;
  LLM_HD void put(int64_t i, float x) const { p[i] = x; }
  LLM_HD OutF32 shifted(int64_t k) const { return {p + k}; }
};
struct OutBF16 {
  uint16_t* p;
  LLM_HD void put(int64_t i, float x) const { p[i] = f32_to_bf16(x); }
  LLM_HD OutBF16 shifted(int64_t k) const { return {p + k}; }
};
struct OutF16 {
  uint16_t* p;
  LLM_HD void put(int64_t i, float x) const { p[i] = f32_to_f16(x); }
  LLM_HD OutF16 shifted(int64_t k) const { return {p + k}; }
};

// Calls fn(view) with the output view matching out.dtype.
template <class Fn>
void optim_with_out(Tensor out, Fn&& fn) {
  switch (out.dtype) {
    case DType::kF32:
      fn(OutF32{out.as<float>()});
      return;
    case DType::kBF16:
      fn(OutBF16{out.as<uint16_t>()});
      return;
    case DType::kF16:
      fn(OutF16{out.as<uint16_t>()});
      return;
    default:
      fail(error_message("optimizer: an output must be fp32, bf16 or fp16 (got ",
                         dtype_name(out.dtype), ")"));
  }
}

}  // namespace ledgerlm
