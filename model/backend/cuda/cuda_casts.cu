// Backend::convert on the GPU: dtype casts with round-to-nearest-even or stochastic rounding.
// The conversions are the CPU's own LLM_HD functions (model/base/dtype.h via common/storage.h); a
// stochastically rounded element draws rounding_bits(seed, stream_offset + i), the CPU's
// counter-based Philox word: both backends produce identical bits for the same (seed, offset).
#include "model/backend/common/random_keys.h"
#include "model/backend/cuda/cuda_common.cuh"
#include "model/backend/mixed_float.h"

namespace ledgerlm::cuda {
namespace {

template <class D, class S>
__global__ void convert_kernel(D* d, const S* s, int64_t n, bool stochastic, uint64_t seed,
                               uint64_t offset) {
  LLM_GRID_STRIDE(i, n) {
    if (stochastic) {
      const uint32_t bits = rounding_bits(seed, offset + static_cast<uint64_t>(i));
      store_stochastic(d[i], load_value(s[i]), bits);
    } else {
      store_value(d[i], load_value(s[i]));
    }
  }
}

}  // namespace

void CudaBackend::convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
                          uint64_t stream_offset) {
  if (n <= 0) return;
  LLM_REQUIRE(dst.data && src.data && dtype_is_float(dst.dtype) && dtype_is_float(src.dtype),
              "cuda backend: convert needs float tensors, got ", dtype_name(src.dtype), " -> ",
              dtype_name(dst.dtype));
  if (dst.dtype == src.dtype) {
    copy(dst, src, n);
    return;
  }
  const bool stochastic = rounds_stochastically(rounding, dst.dtype);
  dispatch_float_pair(dst.dtype, src.dtype, [&](auto dtag, auto stag) {
    using D = decltype(dtag);
    using S = decltype(stag);
    convert_kernel<D, S><<<blocks_for(n), kThreads, 0, stream_>>>(dst.as<D>(), src.as<const S>(), n,
                                                                  stochastic, seed, stream_offset);
  });
  launch_check("convert");
}

}  // namespace ledgerlm::cuda
