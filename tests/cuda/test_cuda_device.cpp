// CUDA device test: bf16 casts on the GPU agree with the CPU's round-to-nearest-even.
// Skips (reported by ctest) on machines without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/backend/cuda/cuda_device.h"
#include "model/base/dtype.h"

namespace ledgerlm {

TEST(CudaDevice, Bf16RoundTripMatchesCpu) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  std::vector<float> in(1000), out(1000);
  for (size_t i = 0; i < in.size(); ++i) in[i] = std::sin(0.37f * static_cast<float>(i)) * 100.0f;
  ASSERT_TRUE(cuda_bf16_roundtrip(in.data(), out.data(), static_cast<int64_t>(in.size())));
  // Exact: both sides implement round-to-nearest-even of the same fp32 values.
  for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(out[i], bf16_to_f32(f32_to_bf16(in[i]))) << i;
}

}  // namespace ledgerlm
