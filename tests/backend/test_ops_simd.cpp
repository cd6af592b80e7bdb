// The fp32 GELU kernels of the default path (cpu_kernels.h: avx512, avx2 or portable, as the CPU
// and LEDGERLM_CPU_ISA choose) through the backend: fp32 forward/backward against the fp64 path on
// the same inputs, over a dense range, a tail that is not a multiple of the vector width, and
// saturating extremes; and the fp32 result does not depend on the thread count.
// test_ops_isa.cpp compares every path the CPU supports with the portable one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/backend/backend.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

std::vector<double> gelu_inputs() {
  std::vector<double> x;
  // 4007 points over [-8, 8] (not a multiple of 16: exercises the masked tail) ...
  for (int i = 0; i < 4007; ++i) x.push_back(-8.0 + 16.0 * i / 4006.0);
  // ... and the saturating regions, where exp overflows or underflows.
  for (double v : {-1e4, -100.0, -30.0, -12.0, 0.0, 12.0, 30.0, 100.0, 1e4}) x.push_back(v);
  return x;
}

struct GeluResult {
  std::vector<double> out, dx;
};

GeluResult gelu_run(Backend& be, const std::vector<double>& x64, const std::vector<double>& g64,
                    bool fp32) {
  const int64_t n = static_cast<int64_t>(x64.size());
  GeluResult r;
  if (!fp32) {
    std::vector<double> x = x64, g = g64, out(x.size()), dx(x.size());
    be.gelu_forward(Tensor(out.data(), DType::kF64), Tensor(x.data(), DType::kF64), n);
    be.gelu_backward(Tensor(dx.data(), DType::kF64), Tensor(x.data(), DType::kF64),
                     Tensor(g.data(), DType::kF64), n);
    return {out, dx};
  }
  std::vector<float> x(x64.begin(), x64.end()), g(g64.begin(), g64.end()), out(x.size()),
      dx(x.size());
  be.gelu_forward(Tensor(out.data(), DType::kF32), Tensor(x.data(), DType::kF32), n);
  be.gelu_backward(Tensor(dx.data(), DType::kF32), Tensor(x.data(), DType::kF32),
                   Tensor(g.data(), DType::kF32), n);
  return {std::vector<double>(out.begin(), out.end()), std::vector<double>(dx.begin(), dx.end())};
}

TEST(OpsSimd, GeluFp32MatchesFp64) {
  auto be = backend_create_cpu(2);
  const std::vector<double> x = gelu_inputs();
  std::vector<double> g(x.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = 1.0 + 0.5 * std::sin(0.37 * static_cast<double>(i));
  const GeluResult ref = gelu_run(*be, x, g, false);
  const GeluResult got = gelu_run(*be, x, g, true);
  const int64_t n = static_cast<int64_t>(x.size());
  // Each output is within a few fp32 ulp of its own magnitude (~1e-6 relative) plus the
  // absolute rounding of 1 + tanh near -1 (~6e-8 |x|). Against max|ref| = 1e4 (the extreme
  // input) a global bound would be loose, so compare the dense range [-8, 8] separately with
  // 2e-6 absolute + 2e-6 relative (max|ref| = 8 there): a wrong exp coefficient or a lost tail
  // element shows up as >= 1e-4.
  const int64_t dense = 4007;
  auto r1 =
      testing::compare_tensor("gelu fwd dense", got.out.data(), ref.out.data(), dense, 2e-6, 2e-6);
  EXPECT_TRUE(r1.ok) << r1.message;
  auto r2 =
      testing::compare_tensor("gelu bwd dense", got.dx.data(), ref.dx.data(), dense, 2e-6, 2e-6);
  EXPECT_TRUE(r2.ok) << r2.message;
  // Extremes: gelu saturates to 0 / x and its derivative to 0 / 1; all finite.
  for (int64_t i = dense; i < n; ++i) {
    EXPECT_TRUE(std::isfinite(got.out[i]) && std::isfinite(got.dx[i])) << "x=" << x[i];
    EXPECT_NEAR(got.out[i], ref.out[i], 1e-6 * std::max(1.0, std::fabs(x[i]))) << "x=" << x[i];
    EXPECT_NEAR(got.dx[i], ref.dx[i], 1e-6) << "x=" << x[i];
  }
}

TEST(OpsSimd, GeluFp32IndependentOfThreads) {
  const std::vector<double> x = gelu_inputs();
  std::vector<double> big;  // > one 16k chunk so the two-thread run really splits the work
  for (int rep = 0; rep < 10; ++rep) big.insert(big.end(), x.begin(), x.end());
  const std::vector<double> g(big.size(), 0.75);
  auto one = backend_create_cpu(1), two = backend_create_cpu(2);
  const GeluResult a = gelu_run(*one, big, g, true), b = gelu_run(*two, big, g, true);
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.dx, b.dx);
}

}  // namespace
}  // namespace ledgerlm
