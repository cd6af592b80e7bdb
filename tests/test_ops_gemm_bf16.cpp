// The native bf16 GEMM (AVX-512 BF16, cpu_gemm_bf16.h; opt-in behind CpuBackend::gemm): checked
// against a double-precision reference on the same bf16-rounded inputs, over shapes that exercise
// every edge (odd K, partial row tiles, partial 32-column panels, several K blocks), both layouts
// of B, bias and accumulate; and bitwise determinism across calls and thread counts. On CPUs
// without AVX512_BF16 the tests report a skip (the fallback is covered by test_ops_forward).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_gemm_bf16.h"
#include "model/base/dtype.h"
#include "model/base/rng.h"
#include "tests/test_util.h"

namespace ledgerlm {
namespace {

std::vector<float> random_f32(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto w = rng_bits(seed, RngStream::kInit, 91, static_cast<uint64_t>(i));
    v[static_cast<size_t>(i)] = static_cast<float>(rng_normal(w[0], w[1]));
  }
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

struct Case {
  int64_t m, n, k;
  bool trans_b, bias, accumulate;
};

class OpsGemmBf16 : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (!cpu::cpu_has_bf16_dot()) GTEST_SKIP() << "CPU has no AVX512_BF16";
  }
};
class OpsGemmBf16Determinism : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cpu::cpu_has_bf16_dot()) GTEST_SKIP() << "CPU has no AVX512_BF16";
  }
};

// Runs C (+)= A op(B) (+ bias) with B in bf16 on the native kernel (called directly: through
// Backend::gemm it is opt-in, see cpu_gemm.cpp) with `be`'s threads; returns C.
std::vector<float> run_gemm(Backend& be, const Case& c, std::vector<float> a,
                            std::vector<uint16_t> b, std::vector<float> bias,
                            std::vector<float> c0) {
  cpu::Bf16GemmArgs g;
  g.a = a.data();
  g.b = b.data();
  g.c = c0.data();
  if (c.bias) g.bias = bias.data();
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.trans_b = c.trans_b;
  g.accumulate = c.accumulate;
  cpu::cpu_gemm_bf16(dynamic_cast<cpu::CpuBackend&>(be), g);
  return c0;
}

TEST_P(OpsGemmBf16, MatchesDoubleReferenceOnRoundedInputs) {
  const Case c = GetParam();
  auto be = backend_create_cpu(2);
  const std::vector<float> a = random_f32(c.m * c.k, 1), bias = random_f32(c.n, 3);
  const std::vector<float> c0 = random_f32(c.m * c.n, 4);
  const std::vector<uint16_t> b = to_bf16(random_f32(c.n * c.k, 2));
  const std::vector<uint16_t> a_rounded = to_bf16(a);
  std::vector<float> got = run_gemm(*be, c, a, b, bias, c0);
  std::vector<double> ref(got.size());
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double s = c.accumulate ? c0[i * c.n + j] : 0.0;
      for (int64_t p = 0; p < c.k; ++p) {
        const uint16_t bv = c.trans_b ? b[j * c.k + p] : b[p * c.n + j];
        s += static_cast<double>(bf16_to_f32(a_rounded[i * c.k + p])) * bf16_to_f32(bv);
      }
      ref[i * c.n + j] = s + (c.bias ? bias[j] : 0.0);
    }
  std::vector<double> got64(got.begin(), got.end());
  // Each bf16 x bf16 product is exact in fp32; only the fp32 sums round. For K <= 600 unit
  // normal inputs the accumulated rounding is ~sqrt(K) * 2^-24 * sqrt(K) ~ 4e-5 absolute against
  // max|ref| ~ 80, i.e. < 1e-6 relative; 1e-5 relative (+1e-5) leaves margin yet catches a
  // dropped or misplaced k pair (an O(1) change) or a missing bias/accumulate term.
  auto r = testing::compare_tensor("bf16 gemm", got64.data(), ref.data(),
                                   static_cast<int64_t>(ref.size()), 1e-5, 1e-5);
  EXPECT_TRUE(r.ok) << r.message;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OpsGemmBf16,
    ::testing::Values(Case{1, 1, 1, true, false, false}, Case{9, 11, 13, true, true, false},
                      Case{9, 11, 13, false, true, true}, Case{16, 32, 64, true, false, false},
                      Case{17, 33, 31, false, false, false}, Case{64, 100, 600, true, true, false},
                      Case{37, 70, 515, false, false, true}, Case{100, 65, 128, true, false, false},
                      Case{8, 48, 1030, true, true, true}));

TEST_F(OpsGemmBf16Determinism, BitwiseDeterministicAcrossCallsAndThreads) {
  const Case c{70, 96, 520, true, true, false};
  const std::vector<float> a = random_f32(c.m * c.k, 5), bias = random_f32(c.n, 6);
  const std::vector<uint16_t> b = to_bf16(random_f32(c.n * c.k, 7));
  const std::vector<float> zeros(c.m * c.n, 0.0f);
  auto one = backend_create_cpu(1), two = backend_create_cpu(2);
  const std::vector<float> r1 = run_gemm(*two, c, a, b, bias, zeros);
  const std::vector<float> r2 = run_gemm(*two, c, a, b, bias, zeros);
  const std::vector<float> r3 = run_gemm(*one, c, a, b, bias, zeros);
  EXPECT_EQ(r1, r2) << "same backend, same inputs: results must be bit-identical";
  EXPECT_EQ(r1, r3) << "each C element sums its k pairs in one fixed order on any thread count";
}

}  // namespace
}  // namespace ledgerlm
