// Non-finite weights are refused (see finite_weights.h).
#include "ckpt/finite_weights.h"

#include <cmath>
#include <cstring>

#include "ckpt/safetensors.h"
#include "model/base/check.h"

namespace ledgerlm {

int64_t first_non_finite(const float* v, int64_t n) {
  // By the bits: an exponent of all ones is NaN or infinity. Blocks of 1024 vectorise; only a
  // block with a hit is searched element by element.
  constexpr int64_t kBlock = 1024;
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t end = b + kBlock < n ? b + kBlock : n;
    uint32_t bad = 0;
    for (int64_t i = b; i < end; ++i) {
      uint32_t bits;
      std::memcpy(&bits, v + i, 4);
      bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (bad == 0) continue;
    for (int64_t i = b; i < end; ++i)
      if (!std::isfinite(v[i])) return i;
  }
  return -1;
}

void require_finite_weights(const std::string& where, const std::string& name,
                            const std::vector<int64_t>& shape, const float* v, int64_t n) {
  const int64_t at = first_non_finite(v, n);
  if (at < 0) return;
  // The element's index in the tensor's shape, row-major.
  std::vector<int64_t> index(shape.size(), 0);
  int64_t rest = at;
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] <= 0) continue;
    index[d] = rest % shape[d];
    rest /= shape[d];
  }
  const float x = v[at];
  const char* value = std::isnan(x) ? "nan" : x > 0 ? "inf" : "-inf";
  fail(error_message(where, ": tensor '", name, "' holds ", value, " at element ", at, " (index ",
                     safetensors_shape_string(index), " of ", safetensors_shape_string(shape),
                     "): non-finite weights cannot be evaluated, sampled, exported or trained "
                     "from"));
}

}  // namespace ledgerlm
