// 8-bit AdamW: the dynamic quantization maps, the block round-trip error bound, which tensors
// keep fp32 state (and that the ledger sees it), and that the 8-bit trajectory tracks fp32 AdamW
// on a least-squares problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "model/backend/optim/quant8.h"
#include "optim/optimizer.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

TEST(Optim8bit, MapsAreSortedAndSpanTheRange) {
  const QuantMap& s = quant_map_signed();
  const QuantMap& u = quant_map_unsigned();
  EXPECT_EQ(s.sorted.front(), -1.0f);
  EXPECT_EQ(s.sorted.back(), 1.0f);
  EXPECT_EQ(u.sorted.front(), 0.0f);
  EXPECT_EQ(u.sorted.back(), 1.0f);
  int zeros = 0;
  for (int i = 0; i < 256; ++i) {
    zeros += s.value[i] == 0.0f;
    EXPECT_EQ(s.value[s.sorted_code[i]], s.sorted[i]);
    EXPECT_EQ(u.value[u.sorted_code[i]], u.sorted[i]);
    if (i > 0) {
      EXPECT_LE(s.sorted[i - 1], s.sorted[i]);
      EXPECT_LT(u.sorted[i - 1], u.sorted[i]) << "unsigned map has a duplicate at " << i;
    }
  }
  EXPECT_EQ(zeros, 2);  // +0 and -0 magnitude codes
  // Dynamic range: the smallest non-zero magnitudes are 1e-6 (signed), 1e-7 (unsigned).
  EXPECT_FLOAT_EQ(u.sorted[1], 1e-7f);
  float smallest = 1.0f;
  for (float v : s.value)
    if (v > 0.0f) smallest = std::min(smallest, v);
  EXPECT_FLOAT_EQ(smallest, 1e-6f);
}

// The bucketed encode (what quant_block_encode runs) against the binary search (what the CUDA
// kernel runs) and against the definition, the nearest map value (ties to the lower), code for
// code: at every map value, its float neighbours, the midpoints between neighbours and theirs, and
// 2^20 random floats over the range of each map down to 1e-12. Exact equality: all three pick
// among the same fp32 values with the same comparisons.
TEST(Optim8bit, BucketedEncodeIsTheNearestCode) {
  for (const bool is_signed : {true, false}) {
    const QuantMap& map = is_signed ? quant_map_signed() : quant_map_unsigned();
    const QuantBuckets& buckets = is_signed ? quant_buckets_signed() : quant_buckets_unsigned();
    EXPECT_LE(quant_buckets_max_fill(map), kQuantBucketScanMax);
    auto nearest = [&](float x) {
      int best = 0;
      for (int i = 1; i < 256; ++i)
        if (std::fabs(x - map.sorted[i]) < std::fabs(x - map.sorted[best])) best = i;
      // Ties go to the lower of the two; equal values (the signed map's two zeros) to the first.
      while (best > 0 && x - map.sorted[best - 1] <= map.sorted[best] - x &&
             map.sorted[best - 1] <= x && x <= map.sorted[best])
        --best;
      return map.value[map.sorted_code[best]];
    };
    std::vector<float> xs;
    for (int i = 0; i < 256; ++i) {
      const float v = map.sorted[i];
      xs.insert(xs.end(), {v, std::nextafter(v, -2.0f), std::nextafter(v, 2.0f)});
      if (i > 0) {
        const float mid = 0.5f * (map.sorted[i - 1] + v);
        xs.insert(xs.end(), {mid, std::nextafter(mid, -2.0f), std::nextafter(mid, 2.0f)});
      }
    }
    std::mt19937_64 gen(11);
    std::uniform_real_distribution<double> log_mag(-12.0, 0.0);
    for (int i = 0; i < (1 << 20); ++i) {
      const float m = static_cast<float>(std::pow(10.0, log_mag(gen)));
      xs.push_back(is_signed && (gen() & 1) ? -m : m);
    }
    xs.insert(xs.end(), {-2.0f, 2.0f, 0.0f, -0.0f});
    for (const float x : xs) {
      const uint8_t fast = quant_encode_bucketed(map, buckets, x);
      ASSERT_EQ(fast, quant_encode(map, x)) << (is_signed ? "signed" : "unsigned") << " x=" << x;
      ASSERT_EQ(map.value[fast], nearest(x)) << (is_signed ? "signed" : "unsigned") << " x=" << x;
    }
  }
}

// Half the gap between the map values around y: the largest error nearest rounding can make.
double half_gap(const QuantMap& map, float y) {
  auto it = std::lower_bound(map.sorted.begin(), map.sorted.end(), y);
  if (it == map.sorted.begin() || it == map.sorted.end()) return 0.0;
  return 0.5 * (static_cast<double>(*it) - static_cast<double>(*(it - 1)));
}

TEST(Optim8bit, RoundTripWithinMapBoundPerBlock) {
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  const int64_t B = 256;
  std::vector<float> x(B), y(B);
  std::vector<uint8_t> codes(B);
  for (int block = 0; block < 64; ++block) {
    const bool is_signed = block % 2 == 0;
    const QuantMap& map = is_signed ? quant_map_signed() : quant_map_unsigned();
    // Log-normal magnitudes over several decades, like Adam's second moment.
    const double scale = std::pow(10.0, -8 + block % 9);
    for (auto& v : x) {
      v = static_cast<float>(scale * std::exp(2.0 * normal(gen)));
      if (is_signed && normal(gen) < 0) v = -v;
    }
    float absmax = 0.0f;
    quant_block_encode(map, x.data(), B, codes.data(), &absmax);
    quant_block_decode(map, codes.data(), B, absmax, y.data());
    for (int64_t i = 0; i < B; ++i) {
      const float norm = x[i] / absmax;
      // Bound: half the local gap, plus fp32 rounding of x/absmax and of code*absmax.
      const double bound = (half_gap(map, norm) + 2e-7) * absmax;
      ASSERT_LE(std::fabs(static_cast<double>(y[i]) - x[i]), bound)
          << "block " << block << " element " << i << " x=" << x[i] << " y=" << y[i];
    }
  }
}

using testing::TensorSpec;

TEST(Optim8bit, SmallTensorsAndEmbeddingsKeepFp32State) {
  const ParamTable table = testing::make_table({{"wte", {128, 64}, ParamKind::kEmbedding},
                                                {"big", {64, 128}, ParamKind::kMatrix},
                                                {"small", {32, 32}, ParamKind::kMatrix},
                                                {"bias", {100}, ParamKind::kBias}});
  for (bool emb32 : {false, true}) {
    OptimConfig c;
    c.name = "adamw8bit";
    c.embedding_fp32_state = emb32;
    testing::TestBackend backend;
    auto opt = optimizer_create(c);
    opt->init(table, 0, table.total, backend);
    const int64_t quantized = emb32 ? 8192 : 16384, fp32 = 1024 + 100 + (emb32 ? 8192 : 0);
    int64_t total_bytes = 0;
    for (const auto& comp : opt->state_components()) {
      SCOPED_TRACE(comp.name);
      if (comp.name == "codes.m" || comp.name == "codes.v") {
        EXPECT_EQ(comp.dtype, DType::kU8);
        EXPECT_EQ(comp.elements, quantized);
        EXPECT_EQ(comp.tag, MemTag::kOptimCodes);
      } else if (comp.name == "absmax.m" || comp.name == "absmax.v") {
        EXPECT_EQ(comp.elements, quantized / 256);
        EXPECT_EQ(comp.tag, MemTag::kOptimAbsmax);
      } else if (comp.name == "m" || comp.name == "v") {
        EXPECT_EQ(comp.dtype, DType::kF32);
        EXPECT_EQ(comp.elements, fp32);
        EXPECT_EQ(comp.tag, comp.name == "m" ? MemTag::kOptimM : MemTag::kOptimV);
      } else {
        ADD_FAILURE() << "unexpected component";
      }
      EXPECT_EQ(comp.bytes, comp.elements * static_cast<int64_t>(dtype_size(comp.dtype)));
      total_bytes += comp.bytes;
    }
    // The tracker saw exactly the listed bytes.
    int64_t tracked = 0;
    for (MemTag t : {MemTag::kOptimCodes, MemTag::kOptimAbsmax, MemTag::kOptimM, MemTag::kOptimV})
      tracked += backend.tracker().usage(t).current;
    EXPECT_EQ(tracked, total_bytes);
    // Views: the small tensors show fp32 m/v, the big matrix codes.
    for (const auto& v : opt->state_views()) {
      const std::string& pname = table.params[v.param].name;
      const bool q = pname == "big" || (pname == "wte" && !emb32);
      EXPECT_EQ(v.dtype == DType::kU8, q && v.name.rfind("codes.", 0) == 0)
          << pname << " " << v.name;
      EXPECT_EQ(v.name == "m" || v.name == "v", !q) << pname << " " << v.name;
    }
  }
}

TEST(Optim8bit, StateBytesPerParamMatchesPaper) {
  const ParamTable table = testing::make_table({{"big", {256, 256}, ParamKind::kMatrix}});
  OptimConfig c;
  c.name = "adamw8bit";
  testing::TestBackend backend;
  auto opt = optimizer_create(c);
  EXPECT_DOUBLE_EQ(opt->state_bytes_per_param(), 2.0 + 8.0 / 256.0);
  opt->init(table, 0, table.total, backend);
  EXPECT_DOUBLE_EQ(opt->state_bytes_per_param(), 2.0 + 8.0 / 256.0);
}

// Least squares: minimise 1/(2N) ||X W^T + b - Y||^2 for W (32 x 256, quantized) and b (32, fp32).
struct LeastSquares {
  static constexpr int64_t N = 128, K = 256, M = 32;
  std::vector<double> x, y;
  explicit LeastSquares(uint64_t seed) {
    std::mt19937_64 gen(seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    x.resize(N * K);
    y.resize(N * M);
    std::vector<double> w_true(M * K);
    for (auto& v : x) v = nd(gen);
    for (auto& v : w_true) v = nd(gen) * 0.1;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double acc = 0.5 + 0.01 * nd(gen);
        for (int64_t k = 0; k < K; ++k) acc += x[n * K + k] * w_true[m * K + k];
        y[n * M + m] = acc;
      }
  }
  // Loss, and gradient into g at the table offsets (w at 0, b at `b_off`).
  double loss_grad(const float* params, int64_t b_off, float* g) const {
    std::fill(g, g + b_off + M, 0.0f);
    std::vector<double> gw(M * K, 0.0), gb(M, 0.0);
    double loss = 0.0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t m = 0; m < M; ++m) {
        double r = params[b_off + m] - y[n * M + m];
        for (int64_t k = 0; k < K; ++k) r += x[n * K + k] * params[m * K + k];
        loss += 0.5 * r * r / N;
        gb[m] += r / N;
        for (int64_t k = 0; k < K; ++k) gw[m * K + k] += r * x[n * K + k] / N;
      }
    for (int64_t i = 0; i < M * K; ++i) g[i] = static_cast<float>(gw[i]);
    for (int64_t m = 0; m < M; ++m) g[b_off + m] = static_cast<float>(gb[m]);
    return loss;
  }
};

TEST(Optim8bit, TracksFp32AdamWOnLeastSquares) {
  const ParamTable table =
      testing::make_table({{"w", {LeastSquares::M, LeastSquares::K}, ParamKind::kMatrix},
                           {"b", {32}, ParamKind::kBias}});
  const int64_t b_off = table.params[1].offset;
  const LeastSquares problem(3);
  std::vector<double> losses[2];
  for (int variant = 0; variant < 2; ++variant) {
    OptimConfig c;
    c.name = variant == 0 ? "adamw" : "adamw8bit";
    c.beta1 = 0.9;
    c.beta2 = 0.999;
    c.weight_decay = 0.0;
    testing::TestBackend backend;
    auto opt = optimizer_create(c);
    opt->init(table, 0, table.total, backend);
    std::vector<float> w(static_cast<size_t>(table.total), 0.0f), g(w.size(), 0.0f);
    for (int s = 1; s <= 120; ++s) {
      losses[variant].push_back(problem.loss_grad(w.data(), b_off, g.data()));
      OptimStepInfo info;
      info.lr = 0.01;
      info.step = s;
      opt->step(w.data(), Tensor(g.data(), DType::kF32), info);
    }
  }
  const double first = losses[0].front(), last32 = losses[0].back(), last8 = losses[1].back();
  EXPECT_LT(last32, 0.05 * first);  // the problem is really being solved
  double worst = 0.0;
  for (size_t s = 0; s < losses[0].size(); ++s)
    worst = std::max(worst, std::fabs(losses[1][s] - losses[0][s]) / losses[0][s]);
  // 8-bit state perturbs m, v by ~1% (the map's relative resolution near 1); the paper reports
  // matching fp32 loss curves. Stated tolerance: every step's loss within 10% of fp32's.
  EXPECT_LT(worst, 0.10) << "final loss fp32 " << last32 << " 8-bit " << last8;
  std::printf("8-bit vs fp32 AdamW: worst relative loss gap %.4f, final %.5f vs %.5f\n", worst,
              last8, last32);
}

}  // namespace
}  // namespace ledgerlm
