// Tests of the CPU backend's whole-buffer utilities and elementwise ops: convert (all float
// dtype pairs, nearest and stochastic rounding), accumulate, sum_squares, all_finite, scale,
// zero, dropout statistics, add, and the backend factory / memory accounting.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/common/random_keys.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "tests/support/backend_ops_support.h"

namespace ledgerlm {
namespace {

// More than one internal chunk (2^15 elements) so chunk boundaries are exercised.
constexpr int64_t kN = 100003;

std::vector<float> random_floats(int64_t n, uint64_t seed) {
  const std::vector<double> v = testing::random_values(n, seed, 1.0, /*site=*/79);
  return std::vector<float>(v.begin(), v.end());
}

class OpsUtility : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = backend_create_cpu(2);
};

TEST_F(OpsUtility, ConvertNearestAllPairs) {
  std::vector<float> f = random_floats(kN, 1);
  f[0] = 65519.0f;  // fp16: rounds to 65504 (below the overflow threshold)
  f[1] = 1e-6f;     // fp16 subnormal
  std::vector<double> d(f.begin(), f.end());
  std::vector<uint16_t> b(kN), h(kN);
  be->convert(Tensor(b.data(), DType::kBF16), Tensor(f.data(), DType::kF32), kN);
  be->convert(Tensor(h.data(), DType::kF16), Tensor(d.data(), DType::kF64), kN);
  int bad = 0;
  for (int64_t i = 0; i < kN; ++i) {
    bad += b[i] != f32_to_bf16(f[i]);
    bad += h[i] != f32_to_f16(f[i]);  // f is exactly representable as double: same rounding
  }
  EXPECT_EQ(bad, 0) << "fp32->bf16 and fp64->fp16 must round to nearest even";
  // Widening is exact: bf16 -> fp64 -> fp16 -> fp32 ... compare each against scalar helpers.
  std::vector<double> bd(kN);
  std::vector<float> hf(kN);
  std::vector<uint16_t> bh(kN);
  be->convert(Tensor(bd.data(), DType::kF64), Tensor(b.data(), DType::kBF16), kN);
  be->convert(Tensor(hf.data(), DType::kF32), Tensor(h.data(), DType::kF16), kN);
  be->convert(Tensor(bh.data(), DType::kF16), Tensor(b.data(), DType::kBF16), kN);
  for (int64_t i = 0; i < kN; ++i) {
    bad += bd[i] != static_cast<double>(bf16_to_f32(b[i]));
    bad += hf[i] != f16_to_f32(h[i]);
    bad += bh[i] != f32_to_f16(bf16_to_f32(b[i]));
  }
  EXPECT_EQ(bad, 0);
  // Same dtype is a copy; fp64 -> fp32 rounds.
  std::vector<float> f2(kN);
  be->convert(Tensor(f2.data(), DType::kF32), Tensor(d.data(), DType::kF64), kN);
  EXPECT_EQ(0, std::memcmp(f2.data(), f.data(), kN * 4));
  EXPECT_THROW(be->convert(Tensor(f2.data(), DType::kI32), Tensor(f.data(), DType::kF32), 4),
               Error);
}

TEST_F(OpsUtility, ConvertStochasticIsUnbiasedAndKeyedByGlobalIndex) {
  // x = 1 + ulp/4: rounds up with probability 1/4. n = 65536 draws: sd of the fraction is
  // sqrt(0.25 * 0.75 / 65536) = 0.0017, so |fraction - 0.25| < 0.01 is a 5.9 sigma bound.
  const int64_t n = 65536;
  for (DType t : {DType::kBF16, DType::kF16}) {
    const float ulp = t == DType::kBF16 ? 1.0f / 128 : 1.0f / 1024;
    std::vector<float> x(n, 1.0f + ulp / 4);
    std::vector<uint16_t> out(n), tail(n / 2);
    be->convert(Tensor(out.data(), t), Tensor(x.data(), DType::kF32), n, Rounding::kStochastic, 9,
                0);
    int64_t up = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = t == DType::kBF16 ? bf16_to_f32(out[i]) : f16_to_f32(out[i]);
      ASSERT_TRUE(v == 1.0f || v == 1.0f + ulp) << v;
      up += v != 1.0f;
    }
    EXPECT_NEAR(static_cast<double>(up) / n, 0.25, 0.01) << dtype_name(t);
    // A shard converting the second half with stream_offset = n/2 gets the same bits.
    be->convert(Tensor(tail.data(), t), Tensor(x.data() + n / 2, DType::kF32), n / 2,
                Rounding::kStochastic, 9, n / 2 + 0);
    EXPECT_EQ(0, std::memcmp(tail.data(), out.data() + n / 2, n / 2 * 2)) << dtype_name(t);
    // Another seed gives another draw.
    be->convert(Tensor(tail.data(), t), Tensor(x.data() + n / 2, DType::kF32), n / 2,
                Rounding::kStochastic, 10, n / 2);
    EXPECT_NE(0, std::memcmp(tail.data(), out.data() + n / 2, n / 2 * 2)) << dtype_name(t);
  }
}

TEST_F(OpsUtility, AccumulateRoundsOnceIntoBf16) {
  std::vector<float> a = random_floats(kN, 2), s = random_floats(kN, 3);
  std::vector<uint16_t> b(kN);
  for (int64_t i = 0; i < kN; ++i) b[i] = f32_to_bf16(a[i]);
  std::vector<uint16_t> expect(kN);
  for (int64_t i = 0; i < kN; ++i) expect[i] = f32_to_bf16(bf16_to_f32(b[i]) + s[i]);
  be->accumulate(Tensor(b.data(), DType::kBF16), Tensor(s.data(), DType::kF32), kN);
  EXPECT_EQ(b, expect);
  std::vector<double> d(a.begin(), a.end());
  be->accumulate(Tensor(d.data(), DType::kF64), Tensor(s.data(), DType::kF32), kN);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(d[i], static_cast<double>(a[i]) + s[i]);
}

TEST_F(OpsUtility, SumSquaresIsExactEnoughAndThreadIndependent) {
  std::vector<float> x = random_floats(kN, 4);
  std::vector<uint16_t> xb(kN);
  for (int64_t i = 0; i < kN; ++i) xb[i] = f32_to_bf16(x[i]);
  double ref = 0, refb = 0;
  for (int64_t i = 0; i < kN; ++i) {
    ref += static_cast<double>(x[i]) * x[i];
    refb += static_cast<double>(bf16_to_f32(xb[i])) * bf16_to_f32(xb[i]);
  }
  // Double accumulation of 1e5 positive terms in another order: relative error ~1e-16 * log n.
  const double got = be->sum_squares(Tensor(x.data(), DType::kF32), kN);
  EXPECT_NEAR(got, ref, 1e-12 * ref);
  EXPECT_NEAR(be->sum_squares(Tensor(xb.data(), DType::kBF16), kN), refb, 1e-12 * refb);
  auto one = backend_create_cpu(1);
  EXPECT_EQ(got, one->sum_squares(Tensor(x.data(), DType::kF32), kN)) << "fixed chunk order";
}

TEST_F(OpsUtility, AllFiniteFindsInfAndNan) {
  std::vector<float> x = random_floats(kN, 5);
  EXPECT_TRUE(be->all_finite(Tensor(x.data(), DType::kF32), kN));
  x[kN - 1] = INFINITY;
  EXPECT_FALSE(be->all_finite(Tensor(x.data(), DType::kF32), kN));
  x[kN - 1] = 0;
  x[40000] = NAN;
  EXPECT_FALSE(be->all_finite(Tensor(x.data(), DType::kF32), kN));
  std::vector<uint16_t> b(100, f32_to_bf16(1.0f));
  EXPECT_TRUE(be->all_finite(Tensor(b.data(), DType::kBF16), 100));
  b[57] = 0x7f80;  // bf16 +inf
  EXPECT_FALSE(be->all_finite(Tensor(b.data(), DType::kBF16), 100));
  std::vector<uint16_t> h(100, f32_to_f16(1.0f));
  h[3] = 0x7e00;  // fp16 NaN
  EXPECT_FALSE(be->all_finite(Tensor(h.data(), DType::kF16), 100));
}

TEST_F(OpsUtility, ScaleZeroAdd) {
  std::vector<float> x = random_floats(kN, 6), y = x, z(kN);
  be->scale(Tensor(x.data(), DType::kF32), kN, 0.5);  // exact in binary
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(x[i], y[i] * 0.5f);
  be->add(Tensor(z.data(), DType::kF32), Tensor(x.data(), DType::kF32),
          Tensor(x.data(), DType::kF32), kN);
  EXPECT_EQ(z, y);  // 0.5y + 0.5y == y exactly
  be->zero(Tensor(z.data(), DType::kF32), kN);
  for (int64_t i = 0; i < kN; ++i) ASSERT_EQ(z[i], 0.0f);
  std::vector<uint16_t> b(8, f32_to_bf16(3.0f));
  be->scale(Tensor(b.data(), DType::kBF16), 8, 1.0 / 3.0);
  EXPECT_EQ(bf16_to_f32(b[0]), 1.0f);
}

TEST_F(OpsUtility, DropoutKeepsOneMinusPAndScales) {
  // n = 1e5 Bernoulli(0.7) draws: sd of the kept fraction 0.00145; bound 0.01 is ~7 sigma.
  const double p = 0.3;
  std::vector<float> x(kN, 1.0f), y(kN, 1.0f), z(kN, 1.0f);
  const DropoutKey key{3, 4, 0, kN}, other_site{3, 5, 0, kN};
  be->dropout(Tensor(x.data(), DType::kF32), kN, p, key);
  be->dropout(Tensor(y.data(), DType::kF32), kN, p, key);
  be->dropout(Tensor(z.data(), DType::kF32), kN, p, other_site);
  int64_t kept = 0;
  for (int64_t i = 0; i < kN; ++i) {
    ASSERT_TRUE(x[i] == 0.0f || x[i] == static_cast<float>(1.0 / 0.7)) << x[i];
    ASSERT_EQ(x[i] != 0.0f, dropout_bits(3, 4, 0, i) >= dropout_threshold(p));
    kept += x[i] != 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(kept) / kN, 0.7, 0.01);
  EXPECT_EQ(x, y) << "same (seed, site): same mask";
  EXPECT_NE(x, z) << "another site: another mask";
  EXPECT_THROW(be->dropout(Tensor(x.data(), DType::kF32), kN, 1.0, key), Error);
}

// The mask of a sequence depends on its place in the global batch, not on which call (micro-batch
// or rank) holds it: a tensor of 6 sequences equals its two halves dropped with first_sequence 0
// and 3, bitwise (the same elements keyed the same way). The per-sequence element count 1001 is
// odd, so Philox groups of four do not line up with the sequences.
TEST_F(OpsUtility, DropoutMaskFollowsTheGlobalSequence) {
  const int64_t per_seq = 1001, seqs = 6, n = per_seq * seqs;
  std::vector<float> whole(n, 1.0f), split(n, 1.0f), shifted(n, 1.0f);
  be->dropout(Tensor(whole.data(), DType::kF32), n, 0.5, DropoutKey{7, 2, 10, per_seq});
  be->dropout(Tensor(split.data(), DType::kF32), n / 2, 0.5, DropoutKey{7, 2, 10, per_seq});
  be->dropout(Tensor(split.data() + n / 2, DType::kF32), n / 2, 0.5, DropoutKey{7, 2, 13, per_seq});
  EXPECT_EQ(whole, split);
  for (int64_t s = 0; s < seqs; ++s)
    for (int64_t e = 0; e < per_seq; ++e)
      ASSERT_EQ(whole[s * per_seq + e] != 0.0f,
                dropout_bits(7, 2, 10 + s, e) >= dropout_threshold(0.5))
          << "sequence " << s << " element " << e;
  be->dropout(Tensor(shifted.data(), DType::kF32), n, 0.5, DropoutKey{7, 2, 11, per_seq});
  EXPECT_NE(whole, shifted) << "another place in the batch: another mask";
  EXPECT_THROW(
      be->dropout(Tensor(whole.data(), DType::kF32), n - 1, 0.5, DropoutKey{7, 2, 0, per_seq}),
      Error)
      << "a partial sequence is refused";
}

TEST_F(OpsUtility, FactoryThreadsAndMemory) {
  EXPECT_EQ(be->num_threads(), 2);
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_EQ(backend_create_cpu(0)->num_threads(), omp_get_num_procs());
  EXPECT_THROW(backend_create_cpu(-1), Error);
  {
    Buffer buf = be->allocate(MemTag::kActivations, 1000);
    EXPECT_EQ(be->tracker().usage(MemTag::kActivations).current, 1000);
    EXPECT_EQ(buf.as<char>()[999], 0) << "allocations are zero-filled";
  }
  EXPECT_EQ(be->tracker().usage(MemTag::kActivations).current, 0);
  EXPECT_EQ(be->tracker().usage(MemTag::kActivations).peak, 1000);
  EXPECT_NE(cpu::cpu_blas_config().find("USE_OPENMP"), std::string::npos)
      << "the OpenMP build of OpenBLAS must be loaded: " << cpu::cpu_blas_config();
}

}  // namespace
}  // namespace ledgerlm
