// Refusal of non-finite weights. A run whose weights hold NaN or infinity (a file edited or
// damaged before its checksum was written, or an import of such a model) evaluates to `loss
// -nan`, samples garbage and exports it: eval, sample, export and train --init-from check every
// tensor they load and stop with one line naming the source, the tensor and the first bad
// element instead. (A training run that diverges stops by itself: train_step.cpp.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ledgerlm {

// The index of the first element of v[0, n) that is NaN or +-infinity, or -1 when all are finite.
int64_t first_non_finite(const float* v, int64_t n);

// Throws one Error when v holds a non-finite value:
//   "<where>: tensor 'NAME' holds nan at element 37 (index [1, 5] of [4, 32]): ..."
// `where` names the run or file the tensor came from.
void require_finite_weights(const std::string& where, const std::string& name,
                            const std::vector<int64_t>& shape, const float* v, int64_t n);

inline void require_finite_weights(const std::string& where, const std::string& name,
                                   const std::vector<int64_t>& shape, const std::vector<float>& v) {
  require_finite_weights(where, name, shape, v.data(), static_cast<int64_t>(v.size()));
}

}  // namespace ledgerlm
