// precision.matmul = bf16 through Backend::gemm (GemmArgs::bf16_inputs): the native AVX-512 BF16
// kernel (cpu_gemm_bf16.cpp) on CPUs that have it, bf16-rounded operands through sgemm elsewhere.
// Checked against a double-precision reference on the same bf16-rounded inputs, over shapes that
// exercise every edge (odd K, partial row panels, partial 32-column panels, several K blocks),
// all four transpose combinations, fp32 and bf16 operands, bias and accumulate; and bitwise
// determinism across calls (and, for the native kernel, across thread counts).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_gemm_bf16.h"
#include "model/base/dtype.h"
#include "model/base/rng.h"
#include "tests/support/backend_ops_support.h"
#include "tests/support/reference_ops.h"

namespace ledgerlm {
namespace {

using Vec = std::vector<double>;

std::vector<float> random_f32(int64_t n, uint64_t seed) {
  const Vec v = testing::random_values(n, seed);
  return std::vector<float>(v.begin(), v.end());
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

struct Case {
  int64_t m, n, k;
  bool trans_a, trans_b, bias, accumulate;
  bool a_bf16, b_bf16;  // operand storage: bf16 bits instead of fp32
};

std::string case_name(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         (c.trans_a ? " T" : " N") + (c.trans_b ? "T" : "N") + (c.bias ? " +bias" : "") +
         (c.accumulate ? " +=C" : "") + (c.a_bf16 ? " A:bf16" : " A:fp32") +
         (c.b_bf16 ? " B:bf16" : " B:fp32");
}

// An operand of `count` values stored as fp32 or as bf16 bits (kept alive by the caller).
struct Operand {
  std::vector<float> f32;
  std::vector<uint16_t> bf16;
  bool is_bf16 = false;
  Tensor tensor() {
    return is_bf16 ? Tensor(bf16.data(), DType::kBF16) : Tensor(f32.data(), DType::kF32);
  }
  // The values the product sees: bf16-rounded either way.
  Vec rounded() const { return testing::as_bf16(Vec(f32.begin(), f32.end())); }
};

Operand make_operand(int64_t count, uint64_t seed, bool as_bf16) {
  Operand o;
  o.f32 = random_f32(count, seed);
  o.is_bf16 = as_bf16;
  if (as_bf16) o.bf16 = to_bf16(o.f32);
  return o;
}

// Runs C (+)= op(A) op(B) (+ bias) with bf16_inputs on `be`; returns C.
std::vector<float> run_gemm(Backend& be, const Case& c, Operand& a, Operand& b,
                            std::vector<float>& bias, std::vector<float> c0) {
  GemmArgs g;
  g.a = a.tensor();
  g.b = b.tensor();
  g.c = Tensor(c0.data(), DType::kF32);
  if (c.bias) g.bias = Tensor(bias.data(), DType::kF32);
  g.m = c.m, g.n = c.n, g.k = c.k;
  g.trans_a = c.trans_a, g.trans_b = c.trans_b;
  g.accumulate = c.accumulate;
  g.bf16_inputs = true;
  be.gemm(g);
  return c0;
}

class OpsGemmBf16 : public ::testing::TestWithParam<Case> {};

// Both paths: the native kernel (where the CPU has it) and the portable rounded-sgemm path.
TEST_P(OpsGemmBf16, MatchesDoubleReferenceOnRoundedInputs) {
  for (const bool native : {true, false}) {
    if (native && !cpu::cpu_has_bf16_dot()) continue;
    cpu::cpu_set_bf16_dot_enabled(native);
    const Case c = GetParam();
    auto be = backend_create_cpu(2);
    Operand a = make_operand(c.m * c.k, 1, c.a_bf16), b = make_operand(c.n * c.k, 2, c.b_bf16);
    std::vector<float> bias = random_f32(c.n, 3);
    const std::vector<float> c0 = random_f32(c.m * c.n, 4);
    std::vector<float> got = run_gemm(*be, c, a, b, bias, c0);
    const Vec ref = testing::naive_gemm(a.rounded(), b.rounded(), Vec(c0.begin(), c0.end()),
                                        c.bias ? Vec(bias.begin(), bias.end()) : Vec(), c.m, c.n,
                                        c.k, c.trans_a, c.trans_b, c.accumulate);
    // Each bf16 x bf16 product is exact in fp32; only the fp32 sums round. For K <= 1030 unit
    // normal inputs the accumulated rounding is ~sqrt(K) * 2^-24 * sqrt(K) ~ 6e-5 absolute against
    // max|ref| ~ 100, i.e. < 1e-6 relative; 1e-5 relative (+1e-5) leaves margin yet catches an
    // unrounded operand (~1e-3 relative), a dropped or misplaced k pair (an O(1) change) or a
    // missing bias/accumulate term.
    testing::expect_tensor_close(
        std::string(native ? "native" : "portable") + " bf16 gemm " + case_name(c),
        Vec(got.begin(), got.end()), ref, 1e-5, 1e-5);
    cpu::cpu_set_bf16_dot_enabled(true);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, OpsGemmBf16,
    ::testing::Values(Case{1, 1, 1, false, true, false, false, false, true},
                      Case{9, 11, 13, false, true, true, false, false, true},
                      Case{9, 11, 13, false, false, true, true, false, false},
                      Case{9, 11, 13, true, false, false, true, false, false},
                      Case{9, 11, 13, true, true, true, false, true, true},
                      Case{16, 32, 64, false, true, false, false, false, true},
                      Case{17, 33, 31, false, false, false, false, true, false},
                      Case{64, 100, 600, false, true, true, false, false, true},
                      Case{37, 70, 515, false, false, false, true, false, false},
                      Case{70, 37, 515, true, false, false, true, false, false},
                      Case{100, 65, 128, false, true, false, false, true, true},
                      Case{8, 48, 1030, false, true, true, true, false, true},
                      Case{48, 40, 1030, true, false, false, true, false, false}));

TEST(OpsGemmBf16Determinism, BitwiseDeterministicAcrossCallsAndThreads) {
  for (const bool trans_a : {false, true}) {
    const Case c{70, 96, 520, trans_a, !trans_a, true, trans_a, false, !trans_a};
    Operand a = make_operand(c.m * c.k, 5, c.a_bf16), b = make_operand(c.n * c.k, 7, c.b_bf16);
    std::vector<float> bias = random_f32(c.n, 6);
    const std::vector<float> zeros(c.m * c.n, 0.0f);
    auto one = backend_create_cpu(1), two = backend_create_cpu(2);
    const std::vector<float> r1 = run_gemm(*two, c, a, b, bias, zeros);
    const std::vector<float> r2 = run_gemm(*two, c, a, b, bias, zeros);
    const std::vector<float> r3 = run_gemm(*one, c, a, b, bias, zeros);
    EXPECT_EQ(r1, r2) << case_name(c) << ": same inputs must give bit-identical results";
    // The native kernel's sum order is fixed per output element; the portable path's sgemm (a
    // library's) may block K differently on another thread count: deterministic per count only.
    if (cpu::cpu_bf16_dot_used(cpu::cpu_isa_default())) {
      EXPECT_EQ(r1, r3) << case_name(c) << ": the sum order must not depend on the thread count";
    }
  }
}

}  // namespace
}  // namespace ledgerlm
