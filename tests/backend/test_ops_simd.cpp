// The fp32 GELU (and SwiGLU) kernels of the default path (cpu_kernels.h: avx512, avx2 or portable,
// as the CPU and LEDGERLM_CPU_ISA choose) through the backend: fp32 forward/backward against the
// fp64 path on the same inputs, over a dense range, a tail that is not a multiple of the vector
// width, and saturating extremes; and the fp32 result does not depend on the thread count.
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

// SwiGLU's gated product (model.mlp = swiglu) on the default path in fp32 against fp64 on the
// same inputs (gate over the GELU inputs, up in [-2, 2]): silu(g) * up and its two gradients.
// fp32 rounds each of ~6 operations plus the vector exp (~2e-7 relative): 2e-6 + 2e-6 against
// max|ref| <= 16 on the dense range; the extremes saturate (silu 0 or g, silu' 0 or 1).
TEST(OpsSimd, SwigluFp32MatchesFp64) {
  auto be = backend_create_cpu(2);
  const std::vector<double> x = gelu_inputs();
  const int64_t n = static_cast<int64_t>(x.size()), dense = 4007;
  std::vector<double> up(x.size()), g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    up[i] = 2.0 * std::sin(0.91 * static_cast<double>(i));
    g[i] = 1.0 + 0.5 * std::sin(0.37 * static_cast<double>(i));
  }
  std::vector<double> ref[3], got[3];  // out, dgate, dup
  for (int k = 0; k < 3; ++k) ref[k].resize(x.size());
  std::vector<double> x64 = x;
  be->swiglu_forward(Tensor(ref[0].data(), DType::kF64), Tensor(x64.data(), DType::kF64),
                     Tensor(up.data(), DType::kF64), n);
  be->swiglu_backward(Tensor(ref[1].data(), DType::kF64), Tensor(ref[2].data(), DType::kF64),
                      Tensor(x64.data(), DType::kF64), Tensor(up.data(), DType::kF64),
                      Tensor(g.data(), DType::kF64), n);
  std::vector<float> xf(x.begin(), x.end()), uf(up.begin(), up.end()), gf(g.begin(), g.end());
  std::vector<float> of(x.size()), dgf(x.size()), duf(x.size());
  be->swiglu_forward(Tensor(of.data(), DType::kF32), Tensor(xf.data(), DType::kF32),
                     Tensor(uf.data(), DType::kF32), n);
  be->swiglu_backward(Tensor(dgf.data(), DType::kF32), Tensor(duf.data(), DType::kF32),
                      Tensor(xf.data(), DType::kF32), Tensor(uf.data(), DType::kF32),
                      Tensor(gf.data(), DType::kF32), n);
  got[0].assign(of.begin(), of.end()), got[1].assign(dgf.begin(), dgf.end());
  got[2].assign(duf.begin(), duf.end());
  const char* names[3] = {"swiglu fwd dense", "swiglu dgate dense", "swiglu dup dense"};
  for (int k = 0; k < 3; ++k) {
    auto r = testing::compare_tensor(names[k], got[k].data(), ref[k].data(), dense, 2e-6, 2e-6);
    EXPECT_TRUE(r.ok) << r.message;
    for (int64_t i = dense; i < n; ++i) {
      EXPECT_TRUE(std::isfinite(got[k][i])) << names[k] << " x=" << x[i];
      EXPECT_NEAR(got[k][i], ref[k][i], 1e-6 * std::max(1.0, std::fabs(x[i])))
          << names[k] << " x=" << x[i];
    }
  }
}

}  // namespace
}  // namespace ledgerlm
