// Rules of the mixed-dtype copies (Backend::convert, Backend::accumulate) that both backends
// follow, written once so that the CPU loops and the CUDA kernels cannot drift apart.
#pragma once

#include <type_traits>

#include "model/backend/backend.h"
#include "model/backend/common/storage.h"

namespace ledgerlm {

// The arithmetic type of dst += src for storage types D and S: double when either is fp64,
// fp32 otherwise.
template <class D, class S>
using AccumulateOf =
    std::conditional_t<std::is_same_v<D, double> || std::is_same_v<S, double>, double, float>;

// Whether a convert into `dst` rounds stochastically: only into a 16-bit format (wider
// destinations are exact or round to nearest).
inline bool rounds_stochastically(Rounding rounding, DType dst) {
  return rounding == Rounding::kStochastic && (dst == DType::kBF16 || dst == DType::kF16);
}

// Calls f(D{}, S{}) with D and S the storage types of `dst` and `src` (dispatch_float on each).
template <class F>
void dispatch_float_pair(DType dst, DType src, F&& f) {
  dispatch_float(dst, [&](auto dtag) { dispatch_float(src, [&](auto stag) { f(dtag, stag); }); });
}

}  // namespace ledgerlm
