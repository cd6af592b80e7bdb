// Tests of the refusal of non-finite weights (ckpt/finite_weights.h): the first NaN or infinity
// is found wherever it is (every position of a vectorised block, the tail), and the one-line
// message names the source, the tensor, the value, the element and its index in the shape.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ckpt/finite_weights.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

TEST(FiniteWeights, FindsTheFirstNonFiniteElement) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const float big = std::numeric_limits<float>::max();
  const float tiny = std::numeric_limits<float>::denorm_min();
  std::vector<float> v(2500, 0.5f);
  v[7] = big;
  v[8] = -big;
  v[9] = tiny;
  EXPECT_EQ(first_non_finite(v.data(), static_cast<int64_t>(v.size())), -1);
  EXPECT_EQ(first_non_finite(v.data(), 0), -1);
  for (int64_t at : {0, 1, 1023, 1024, 2047, 2048, 2499}) {
    for (float bad : {nan, inf, -inf, -nan}) {
      std::vector<float> w = v;
      w[static_cast<size_t>(at)] = bad;
      if (at + 1 < 2500) w.back() = nan;  // a later one is not the first
      EXPECT_EQ(first_non_finite(w.data(), static_cast<int64_t>(w.size())), at) << at;
    }
  }
}

TEST(FiniteWeights, MessageNamesSourceTensorValueAndElement) {
  std::vector<float> v(4 * 8, 1.0f);
  require_finite_weights("run 'runs/x'", "block.0.mlp.fc.weight", {4, 8}, v);  // all finite
  v[13] = -std::numeric_limits<float>::infinity();
  v[20] = std::numeric_limits<float>::quiet_NaN();
  const std::string what = testing::error_of([&] {
    require_finite_weights("run 'runs/x'", "block.0.mlp.fc.weight", {4, 8}, v);
  });
  EXPECT_NE(what.find("run 'runs/x': tensor 'block.0.mlp.fc.weight' holds -inf at element 13 "
                      "(index [1, 5] of [4, 8])"),
            std::string::npos)
      << what;
  EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  std::vector<float> bias(3, 0.0f);
  bias[2] = std::numeric_limits<float>::quiet_NaN();
  const std::string b =
      testing::error_of([&] { require_finite_weights("weights file 'w'", "ln.bias", {3}, bias); });
  EXPECT_NE(b.find("'ln.bias' holds nan at element 2 (index [2] of [3])"), std::string::npos) << b;
}

}  // namespace
}  // namespace ledgerlm
