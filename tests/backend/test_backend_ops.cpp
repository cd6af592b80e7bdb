// Every Backend op on every backend of this build (cpu, guard, cuda), forward and backward,
// against fp64 references computed with naive loops. fp32 results: per tensor
// max|got - ref| <= 1e-5 + 1e-4 * max|ref|. Outputs stored in bf16: 1e-5 + 8e-3 * max|ref|
// (one round to nearest bf16 is a relative error of at most 2^-9 ~ 2e-3 of the element, which is
// at most max|ref|; 8e-3 leaves a factor 4 for the fp32 arithmetic before the rounding). Random
// bits (dropout, stochastic rounding) are compared bit for bit with the CPU's formulas. The cpu
// and guard instances carry the ctest label `backend`; the cuda instances and the CUDA-only
// cases carry `cuda` and report "skipped: no CUDA device" where no GPU is visible, which ctest
// lists as skipped. The harness and the shared fp64 references: tests/support/backend_ops_support.h
// and tests/support/reference_ops.h.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/common/random_keys.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/optim/optim_kernels_8bit.h"
#include "model/backend/optim/optim_op.h"
#include "model/backends/backend_factory.h"
#include "tests/support/backend_ops_support.h"
#include "tests/support/reference_ops.h"

namespace ledgerlm {
namespace {

using testing::as_bf16;
using testing::as_f32;
using testing::DeviceData;
using testing::expect_tensor_close;
using testing::gelu;
using testing::gelu_grad;
using testing::naive_attention;
using testing::naive_cross_entropy;
using testing::naive_gemm;
using testing::naive_layernorm;
using testing::naive_layernorm_backward;
using testing::random_values;
using testing::T;
using testing::T32;
using Vec = std::vector<double>;

constexpr double kRtolBf16 = 8e-3;

class BackendOps : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !testing::cuda_device_present())
      GTEST_SKIP() << testing::kNoCudaDevice;
    be_ = backend_create(GetParam(), BackendOptions{2, 0});
    dd_ = std::make_unique<DeviceData>(*be_);
  }
  Backend& be() { return *be_; }
  DeviceData& dd() { return *dd_; }

  std::unique_ptr<Backend> be_;
  std::unique_ptr<DeviceData> dd_;
};

// ---- GEMM -----------------------------------------------------------------------------------
TEST_P(BackendOps, GemmFp32AllTransposesAccumulateBias) {
  const int64_t m = 37, n = 29, k = 23;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          const Vec a = as_f32(random_values(m * k, 1)), b = as_f32(random_values(k * n, 2));
          const Vec c0 = as_f32(random_values(m * n, 3));
          const Vec bias = with_bias ? as_f32(random_values(n, 4)) : Vec();
          Buffer da = dd().f32(a), db = dd().f32(b), dc = dd().f32(c0);
          Buffer dbias = with_bias ? dd().f32(bias) : Buffer();
          GemmArgs g;
          g.a = T32(da), g.b = T32(db), g.c = T32(dc);
          if (with_bias) g.bias = T32(dbias);
          g.m = m, g.n = n, g.k = k, g.trans_a = ta, g.trans_b = tb, g.accumulate = acc;
          be().gemm(g);
          const std::string what = "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                                   " acc=" + std::to_string(acc) +
                                   " bias=" + std::to_string(with_bias);
          expect_tensor_close(what, dd().get32(dc, m * n),
                              naive_gemm(a, b, c0, bias, m, n, k, ta, tb, acc));
        }
}

// bf16 / fp16 operands are exact in fp32, so the reference on the stored values keeps the fp32
// bound; a bf16 C adds one rounding (kRtolBf16).
TEST_P(BackendOps, GemmLowPrecisionOperandsAndOutputs) {
  const int64_t m = 33, n = 40, k = 24;
  const Vec a = as_f32(random_values(m * k, 5)), b = random_values(n * k, 6);
  const Vec bias = as_bf16(random_values(n, 7));
  const Vec b16 = as_bf16(b);
  Vec bh(b.size());
  for (size_t i = 0; i < b.size(); ++i) bh[i] = f16_to_f32(f32_to_f16(static_cast<float>(b[i])));
  Buffer da = dd().f32(a), dbb = dd().bits16(testing::bf16_bits(b), DType::kBF16);
  Buffer dbh = dd().bits16(testing::f16_bits(b), DType::kF16);
  Buffer dbias = dd().bits16(testing::bf16_bits(bias), DType::kBF16);
  // fp32 activations x bf16 weights (a linear layer with bf16 parameters), fp32 C, bf16 bias.
  {
    Buffer dc = dd().zeros(DType::kF32, m * n);
    GemmArgs g;
    g.a = T32(da), g.b = T(dbb, DType::kBF16), g.c = T32(dc), g.bias = T(dbias, DType::kBF16);
    g.m = m, g.n = n, g.k = k, g.trans_b = true;
    be().gemm(g);
    expect_tensor_close("gemm f32 x bf16", dd().get32(dc, m * n),
                        naive_gemm(a, b16, {}, bias, m, n, k, false, true, false));
  }
  // fp16 x fp16 into fp32.
  {
    Buffer dah = dd().bits16(testing::f16_bits(a), DType::kF16);
    Vec ah(a.size());
    for (size_t i = 0; i < a.size(); ++i) ah[i] = f16_to_f32(f32_to_f16(static_cast<float>(a[i])));
    Buffer dc = dd().zeros(DType::kF32, m * n);
    GemmArgs g;
    g.a = T(dah, DType::kF16), g.b = T(dbh, DType::kF16), g.c = T32(dc);
    g.m = m, g.n = n, g.k = k, g.trans_b = true;
    be().gemm(g);
    expect_tensor_close("gemm f16 x f16", dd().get32(dc, m * n),
                        naive_gemm(ah, bh, {}, {}, m, n, k, false, true, false));
  }
  // precision.matmul = bf16: fp32 operands rounded to bf16, then exact products, fp32 sums.
  {
    Buffer db32 = dd().f32(as_f32(b));
    Buffer dc = dd().zeros(DType::kF32, m * n);
    GemmArgs g;
    g.a = T32(da), g.b = T32(db32), g.c = T32(dc);
    g.m = m, g.n = n, g.k = k, g.trans_b = true, g.bf16_inputs = true;
    be().gemm(g);
    expect_tensor_close("gemm bf16_inputs", dd().get32(dc, m * n),
                        naive_gemm(as_bf16(a), b16, {}, {}, m, n, k, false, true, false));
  }
  // bf16 C, accumulated.
  {
    const Vec c0 = as_bf16(random_values(m * n, 8));
    Buffer dc = dd().bits16(testing::bf16_bits(c0), DType::kBF16);
    GemmArgs g;
    g.a = T32(da), g.b = T(dbb, DType::kBF16), g.c = T(dc, DType::kBF16);
    g.m = m, g.n = n, g.k = k, g.trans_b = true, g.accumulate = true;
    be().gemm(g);
    expect_tensor_close("gemm bf16 C accumulate", dd().get(dc, DType::kBF16, m * n),
                        naive_gemm(a, b16, c0, {}, m, n, k, false, true, true), 1e-5, kRtolBf16);
  }
}

TEST_P(BackendOps, GemmFp64) {
  const int64_t m = 9, n = 7, k = 5;
  const Vec a = random_values(m * k, 11), b = random_values(n * k, 12),
            c0 = random_values(m * n, 13);
  const Vec bias = random_values(n, 14);
  Buffer da = dd().f64(a), db = dd().f64(b), dc = dd().f64(c0), dbias = dd().f64(bias);
  GemmArgs g;
  g.a = T(da, DType::kF64), g.b = T(db, DType::kF64), g.c = T(dc, DType::kF64);
  g.bias = T(dbias, DType::kF64);
  g.m = m, g.n = n, g.k = k, g.trans_b = true, g.accumulate = true;
  be().gemm(g);
  expect_tensor_close("gemm fp64", dd().get(dc, DType::kF64, m * n),
                      naive_gemm(a, b, c0, bias, m, n, k, false, true, true), 1e-12, 1e-12);
}

TEST_P(BackendOps, BiasBackwardAccumulates) {
  const int64_t m = 300, n = 45;
  const Vec d = as_f32(random_values(m * n, 15)), b0 = as_f32(random_values(n, 16));
  Buffer dd_ = dd().f32(d), db = dd().f32(b0);
  be().bias_backward(T32(db), T32(dd_), m, n);
  Vec ref = b0;
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < n; ++j) ref[j] += d[r * n + j];
  expect_tensor_close("bias_backward", dd().get32(db, n), ref);
}

// ---- embedding --------------------------------------------------------------------------------
TEST_P(BackendOps, EmbeddingForwardBackward) {
  const int64_t batch = 3, seq = 17, c = 24, vocab = 11;
  std::vector<int32_t> tokens(batch * seq);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 7 + i / 5) % 9);
  const Vec wte = as_f32(random_values(vocab * c, 17)), wpe = as_f32(random_values(seq * c, 18));
  const Vec dout = as_f32(random_values(batch * seq * c, 19));
  Buffer dt = dd().i32(tokens), dwte = dd().f32(wte), dwpe = dd().f32(wpe);
  Buffer out = dd().zeros(DType::kF32, batch * seq * c);
  be().embedding_forward(T32(out), T(dt, DType::kI32), T32(dwte), T32(dwpe), batch, seq, c);
  Vec ref(batch * seq * c);
  for (int64_t r = 0; r < batch * seq; ++r)
    for (int64_t i = 0; i < c; ++i)
      ref[r * c + i] = wte[tokens[r] * c + i] + wpe[(r % seq) * c + i];
  expect_tensor_close("embedding_forward", dd().get32(out, batch * seq * c), ref);

  for (DType gt : {DType::kF32, DType::kBF16}) {
    const Vec g0 = as_bf16(random_values(vocab * c, 20)), p0 = as_bf16(random_values(seq * c, 21));
    Buffer gte = gt == DType::kF32 ? dd().f32(g0) : dd().bits16(testing::bf16_bits(g0), gt);
    Buffer gpe = gt == DType::kF32 ? dd().f32(p0) : dd().bits16(testing::bf16_bits(p0), gt);
    Buffer ddo = dd().f32(dout);
    be().embedding_backward(T(gte, gt), T(gpe, gt), T32(ddo), T(dt, DType::kI32), batch, seq, c);
    Vec rte = g0, rpe = p0;
    for (int64_t r = 0; r < batch * seq; ++r)
      for (int64_t i = 0; i < c; ++i) {
        rte[tokens[r] * c + i] += dout[r * c + i];
        rpe[(r % seq) * c + i] += dout[r * c + i];
      }
    const double rtol = gt == DType::kF32 ? testing::kRtol32 : kRtolBf16;
    expect_tensor_close(std::string("dwte ") + dtype_name(gt), dd().get(gte, gt, vocab * c), rte,
                        1e-5, rtol);
    expect_tensor_close(std::string("dwpe ") + dtype_name(gt), dd().get(gpe, gt, seq * c), rpe,
                        1e-5, rtol);
  }
}

// ---- layernorm ----------------------------------------------------------------------------------
TEST_P(BackendOps, LayernormForwardBackward) {
  const int64_t rows = 70, c = 48;
  const Vec x = as_f32(random_values(rows * c, 22, 2.0)), w = as_f32(random_values(c, 23));
  const Vec bias = as_f32(random_values(c, 24)), dout = as_f32(random_values(rows * c, 25));
  const Vec dx0 = as_f32(random_values(rows * c, 26)), dw0 = as_f32(random_values(c, 27));
  const Vec db0 = as_f32(random_values(c, 28));
  Buffer bx = dd().f32(x), bw = dd().f32(w), bb = dd().f32(bias);
  Buffer out = dd().zeros(DType::kF32, rows * c), mean = dd().zeros(DType::kF32, rows),
         rstd = dd().zeros(DType::kF32, rows);
  be().layernorm_forward(T32(out), T32(mean), T32(rstd), T32(bx), T32(bw), T32(bb), rows, c);
  const testing::LayernormRef ref = naive_layernorm(x, w, bias, rows, c);
  const testing::LayernormGrads rg = naive_layernorm_backward(x, w, dout, dx0, dw0, db0, rows, c);
  expect_tensor_close("layernorm out", dd().get32(out, rows * c), ref.out);
  expect_tensor_close("layernorm mean", dd().get32(mean, rows), ref.mean);
  expect_tensor_close("layernorm rstd", dd().get32(rstd, rows), ref.rstd);
  Buffer bdo = dd().f32(dout), bdx = dd().f32(dx0), bdw = dd().f32(dw0), bdb = dd().f32(db0);
  be().layernorm_backward(T32(bdx), T32(bdw), T32(bdb), T32(bdo), T32(bx), T32(bw), T32(mean),
                          T32(rstd), rows, c);
  expect_tensor_close("layernorm dx", dd().get32(bdx, rows * c), rg.dx);
  expect_tensor_close("layernorm dweight", dd().get32(bdw, c), rg.dweight);
  expect_tensor_close("layernorm dbias", dd().get32(bdb, c), rg.dbias);
}

// ---- elementwise --------------------------------------------------------------------------------
TEST_P(BackendOps, AddGeluForwardBackward) {
  const int64_t n = 5000;
  const Vec a = as_f32(random_values(n, 29, 3.0)), b = as_f32(random_values(n, 30));
  Buffer ba = dd().f32(a), bb = dd().f32(b), out = dd().zeros(DType::kF32, n);
  be().add(T32(out), T32(ba), T32(bb), n);
  Vec r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = a[i] + b[i];
  expect_tensor_close("add", dd().get32(out, n), r);
  be().gelu_forward(T32(out), T32(ba), n);
  for (int64_t i = 0; i < n; ++i) r[i] = gelu(a[i]);
  expect_tensor_close("gelu_forward", dd().get32(out, n), r);
  be().gelu_backward(T32(out), T32(ba), T32(bb), n);
  for (int64_t i = 0; i < n; ++i) r[i] = b[i] * gelu_grad(a[i]);
  expect_tensor_close("gelu_backward", dd().get32(out, n), r);
}

// ---- fused ops ----------------------------------------------------------------------------------
// Each fused entry point is defined as the composition its Backend default runs (backend.h):
// a backend's own version must give the same bits as that composition on the same backend.
TEST_P(BackendOps, FusedOpsEqualTheirCompositionsBitwise) {
  for (int64_t c : {48, 128}) {
    const int64_t rows = 70;
    const Vec a = as_f32(random_values(rows * c, 31, 2.0)), b = as_f32(random_values(rows * c, 32));
    const Vec w = as_f32(random_values(c, 33)), bias = as_f32(random_values(c, 34));
    const Vec db0 = as_f32(random_values(4 * c, 35)), g = as_f32(random_values(rows * 4 * c, 36));
    const Vec x = as_f32(random_values(rows * 4 * c, 37, 3.0));
    Buffer ba = dd().f32(a), bb = dd().f32(b), bw = dd().f32(w), bbias = dd().f32(bias);
    Buffer bx = dd().f32(x), bg = dd().f32(g);
    Vec got[2][6];
    for (int fused = 0; fused < 2; ++fused) {
      Buffer sum = dd().zeros(DType::kF32, rows * c), out = dd().zeros(DType::kF32, rows * c);
      Buffer mean = dd().zeros(DType::kF32, rows), rstd = dd().zeros(DType::kF32, rows);
      Buffer dx = dd().zeros(DType::kF32, rows * 4 * c), db = dd().f32(db0);
      if (fused) {
        be().add_layernorm_forward(T32(sum), T32(out), T32(mean), T32(rstd), T32(ba), T32(bb),
                                   T32(bw), T32(bbias), rows, c);
        be().gelu_bias_backward(T32(dx), T32(db), T32(bx), T32(bg), rows, 4 * c);
      } else {
        be().Backend::add_layernorm_forward(T32(sum), T32(out), T32(mean), T32(rstd), T32(ba),
                                            T32(bb), T32(bw), T32(bbias), rows, c);
        be().Backend::gelu_bias_backward(T32(dx), T32(db), T32(bx), T32(bg), rows, 4 * c);
      }
      got[fused][0] = dd().get32(sum, rows * c), got[fused][1] = dd().get32(out, rows * c);
      got[fused][2] = dd().get32(mean, rows), got[fused][3] = dd().get32(rstd, rows);
      got[fused][4] = dd().get32(dx, rows * 4 * c), got[fused][5] = dd().get32(db, 4 * c);
    }
    const char* names[6] = {"sum", "out", "mean", "rstd", "dx", "dbias"};
    for (int t = 0; t < 6; ++t)
      EXPECT_EQ(got[1][t], got[0][t]) << "C" << c << " fused " << names[t];
  }
}

// The mask is a pure function of (seed, site, sequence, element): exactly the CPU's bits.
TEST_P(BackendOps, DropoutMaskIsTheCpuMaskBitForBit) {
  const int64_t per_seq = 77, seqs = 5, n = per_seq * seqs;
  const double p = 0.3;
  DropoutKey key{1234, 56, 9, per_seq};
  Buffer x = dd().f32(Vec(n, 1.0));
  be().dropout(T32(x), n, p, key);
  std::vector<float> got = dd().raw_get<float>(x, DType::kF32, n);
  const float keep = static_cast<float>(1.0 / (1.0 - p));
  int64_t dropped = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t s = static_cast<uint64_t>(i / per_seq), e = static_cast<uint64_t>(i % per_seq);
    const bool kept =
        dropout_bits(key.seed, key.site, key.first_sequence + s, e) >= dropout_threshold(p);
    const float want = kept ? 1.0f * keep : 0.0f;
    ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << "element " << i;
    dropped += !kept;
  }
  EXPECT_GT(dropped, n / 5);
  EXPECT_LT(dropped, n * 2 / 5);
}

// ---- attention ----------------------------------------------------------------------------------
TEST_P(BackendOps, AttentionForwardBackwardWithAndWithoutDropout) {
  for (double drop : {0.0, 0.2}) {
    AttentionArgs a;
    a.batch = 2, a.seq = 45, a.channels = 32, a.heads = 2;
    a.dropout = drop, a.seed = 77, a.site = 5, a.first_sequence = 3;
    const int64_t nqkv = a.batch * a.seq * 3 * a.channels, nout = a.batch * a.seq * a.channels;
    const Vec qkv = as_f32(random_values(nqkv, 31)), dout = as_f32(random_values(nout, 32));
    const testing::AttentionRef ref = naive_attention(qkv, dout, a);
    Buffer bq = dd().f32(qkv), bo = dd().zeros(DType::kF32, nout);
    Buffer bl = dd().zeros(DType::kF32, a.batch * a.heads * a.seq);
    be().attention_forward(T32(bo), T32(bl), T32(bq), a);
    const std::string tag = " dropout " + std::to_string(drop);
    expect_tensor_close("attention out" + tag, dd().get32(bo, nout), ref.out);
    expect_tensor_close("attention lse" + tag, dd().get32(bl, a.batch * a.heads * a.seq), ref.lse);
    Buffer bdo = dd().f32(dout), bdq = dd().zeros(DType::kF32, nqkv);
    be().attention_backward(T32(bdq), T32(bdo), T32(bq), T32(bo), T32(bl), a);
    expect_tensor_close("attention dqkv" + tag, dd().get32(bdq, nqkv), ref.dqkv);
  }
}

// Grouped-query attention (AttentionArgs::kv_heads): 4 query heads on 2 kv heads, multi-query
// (4 on 1) with dropout, and 3 on 1 at head_dim 48 (lanes own 2 columns, the second partly),
// over 45 rows (two 32-row tiles). Against the fp64 reference (rows [q | k | v] of width
// C + 2 KV hd, query head h on kv head h / (H / KV), dk and dv summed over a group) at the
// harness's fp32 bound; other backends also against the CPU backend on the same fp32 inputs
// (rtol 1e-4: both fp32, summation orders differ); dqkv starts non-zero (the backward writes
// every element, dk and dv included), and a second backward is bitwise the first (the sum over
// a group's query heads has a fixed order).
TEST_P(BackendOps, AttentionGroupedQueryMatchesReferenceAndCpu) {
  struct Case {
    int64_t heads, kv_heads, channels;
    double dropout;
  };
  auto cpu = backend_create_cpu(2);
  DeviceData cpu_dd(*cpu);
  for (const Case& c : {Case{4, 2, 64, 0.0}, Case{4, 1, 64, 0.2}, Case{3, 1, 144, 0.0}}) {
    AttentionArgs a;
    a.batch = 2, a.seq = 45, a.channels = c.channels, a.heads = c.heads, a.kv_heads = c.kv_heads;
    a.dropout = c.dropout, a.seed = 78, a.site = 6, a.first_sequence = 5;
    const int64_t nqkv = a.batch * a.seq * a.qkv_width(), nout = a.batch * a.seq * a.channels,
                  nlse = a.batch * a.heads * a.seq;
    const Vec qkv = as_f32(random_values(nqkv, 36)), dout = as_f32(random_values(nout, 37));
    const testing::AttentionRef ref = naive_attention(qkv, dout, a);
    const std::string tag = " H " + std::to_string(c.heads) + " KV " + std::to_string(c.kv_heads) +
                            " dropout " + std::to_string(c.dropout);
    // out, lse, dqkv and a second dqkv on backend `b`.
    auto run = [&](Backend& b, DeviceData& d) {
      Buffer bq = d.f32(qkv), bo = d.zeros(DType::kF32, nout), bl = d.zeros(DType::kF32, nlse);
      b.attention_forward(T32(bo), T32(bl), T32(bq), a);
      Buffer bdo = d.f32(dout);
      std::vector<std::vector<float>> r{d.raw_get<float>(bo, DType::kF32, nout),
                                        d.raw_get<float>(bl, DType::kF32, nlse)};
      for (int rerun = 0; rerun < 2; ++rerun) {
        Buffer bdq = d.f32(Vec(nqkv, 77.0));
        b.attention_backward(T32(bdq), T32(bdo), T32(bq), T32(bo), T32(bl), a);
        r.push_back(d.raw_get<float>(bdq, DType::kF32, nqkv));
      }
      return r;
    };
    const std::vector<std::vector<float>> got = run(be(), dd());
    auto wide = [](const std::vector<float>& f) { return Vec(f.begin(), f.end()); };
    expect_tensor_close("gqa attention out" + tag, wide(got[0]), ref.out);
    expect_tensor_close("gqa attention lse" + tag, wide(got[1]), ref.lse);
    expect_tensor_close("gqa attention dqkv" + tag, wide(got[2]), ref.dqkv);
    EXPECT_EQ(std::memcmp(got[2].data(), got[3].data(), got[2].size() * 4), 0)
        << "gqa attention dqkv" << tag << ": a second backward differs";
    if (GetParam() == "cpu") continue;
    const std::vector<std::vector<float>> want = run(*cpu, cpu_dd);
    expect_tensor_close("gqa attention out vs cpu" + tag, got[0], want[0]);
    expect_tensor_close("gqa attention lse vs cpu" + tag, got[1], want[1]);
    expect_tensor_close("gqa attention dqkv vs cpu" + tag, got[2], want[2]);
  }
}

TEST_P(BackendOps, AttentionDecode) {
  const int64_t positions = 13, heads = 2, c = 32, stride = 48, hd = c / heads;
  const Vec q = as_f32(random_values(c, 33)), kc = as_f32(random_values(positions * stride, 34));
  const Vec vc = as_f32(random_values(positions * stride, 35));
  Buffer bq = dd().f32(q), bk = dd().f32(kc), bv = dd().f32(vc), out = dd().zeros(DType::kF32, c);
  be().attention_decode(T32(out), T32(bq), T32(bk), T32(bv), positions, heads, c, stride);
  Vec ref(c);
  for (int64_t h = 0; h < heads; ++h) {
    Vec s(positions);
    double mx = -INFINITY, sum = 0;
    for (int64_t t = 0; t < positions; ++t) {
      double d = 0;
      for (int64_t j = 0; j < hd; ++j) d += q[h * hd + j] * kc[t * stride + h * hd + j];
      s[t] = d / std::sqrt(static_cast<double>(hd));
      mx = std::fmax(mx, s[t]);
    }
    for (int64_t t = 0; t < positions; ++t) sum += std::exp(s[t] - mx);
    for (int64_t j = 0; j < hd; ++j) {
      double o = 0;
      for (int64_t t = 0; t < positions; ++t)
        o += std::exp(s[t] - mx) / sum * vc[t * stride + h * hd + j];
      ref[h * hd + j] = o;
    }
  }
  expect_tensor_close("attention_decode", dd().get32(out, c), ref);
}

// ---- cross-entropy ------------------------------------------------------------------------------
TEST_P(BackendOps, SoftmaxCrossEntropyWithPaddingAndGradient) {
  const int64_t rows = 7, vocab = 50, padded = 64;
  const Vec logits = as_f32(random_values(rows * padded, 36, 3.0));
  std::vector<int32_t> targets(rows);
  for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 13) % vocab);
  const double scale = 0.25;
  Buffer bl = dd().f32(logits), bt = dd().i32(targets), loss = dd().zeros(DType::kF32, rows);
  be().softmax_cross_entropy(T32(loss), T32(bl), T(bt, DType::kI32), rows, vocab, padded, scale);
  const testing::CrossEntropyRef ref =
      naive_cross_entropy(logits, targets, rows, vocab, padded, scale);
  expect_tensor_close("cross-entropy losses", dd().get32(loss, rows), ref.loss);
  expect_tensor_close("cross-entropy dlogits", dd().get32(bl, rows * padded), ref.dlogits);
}

// ---- MLP variants and the logit soft-cap (model.mlp, model.logit_softcap) -----------------------
TEST_P(BackendOps, Relu2SwigluAndSoftcapMatchNaiveLoops) {
  const int64_t n = 5000;
  const Vec a = as_f32(random_values(n, 61, 3.0)), b = as_f32(random_values(n, 62, 2.0));
  const Vec g = as_f32(random_values(n, 63));
  Buffer ba = dd().f32(a), bb = dd().f32(b), bg = dd().f32(g);
  Buffer out = dd().zeros(DType::kF32, n), out2 = dd().zeros(DType::kF32, n);
  Vec r(n), r2(n);
  be().relu2_forward(T32(out), T32(ba), n);
  for (int64_t i = 0; i < n; ++i) r[i] = a[i] > 0 ? a[i] * a[i] : 0.0;
  expect_tensor_close("relu2_forward", dd().get32(out, n), r);
  be().relu2_backward(T32(out), T32(ba), T32(bg), n);
  for (int64_t i = 0; i < n; ++i) r[i] = g[i] * (a[i] > 0 ? 2 * a[i] : 0.0);
  expect_tensor_close("relu2_backward", dd().get32(out, n), r);
  auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
  be().swiglu_forward(T32(out), T32(ba), T32(bb), n);  // gate a, up b
  for (int64_t i = 0; i < n; ++i) r[i] = a[i] * sig(a[i]) * b[i];
  expect_tensor_close("swiglu_forward", dd().get32(out, n), r);
  be().swiglu_backward(T32(out), T32(out2), T32(ba), T32(bb), T32(bg), n);
  for (int64_t i = 0; i < n; ++i) {
    const double s = sig(a[i]);
    r[i] = g[i] * b[i] * s * (1 + a[i] * (1 - s));
    r2[i] = g[i] * a[i] * s;
  }
  expect_tensor_close("swiglu_backward dgate", dd().get32(out, n), r);
  expect_tensor_close("swiglu_backward dup", dd().get32(out2, n), r2);
  be().softcap_forward(T32(out), T32(ba), n, 1.5);
  for (int64_t i = 0; i < n; ++i) r[i] = 1.5 * std::tanh(a[i] / 1.5);
  expect_tensor_close("softcap_forward", dd().get32(out, n), r);

  // The soft-capped cross-entropy: the plain one's loss and gradient of y = cap tanh(x / cap),
  // times the cap's derivative 1 - (y / cap)^2.
  const int64_t rows = 7, vocab = 50, padded = 64;
  const double cap = 2.0, scale = 0.25;
  const Vec x = as_f32(random_values(rows * padded, 64, 3.0));
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = cap * std::tanh(x[i] / cap);
  const Vec y32 = as_f32(y);
  std::vector<int32_t> targets(rows);
  for (int64_t r0 = 0; r0 < rows; ++r0) targets[r0] = static_cast<int32_t>((r0 * 11) % vocab);
  Buffer bl = dd().f32(y32), bt = dd().i32(targets), loss = dd().zeros(DType::kF32, rows);
  be().softcap_cross_entropy(T32(loss), T32(bl), T(bt, DType::kI32), rows, vocab, padded, scale,
                             cap);
  testing::CrossEntropyRef ref = naive_cross_entropy(y32, targets, rows, vocab, padded, scale);
  for (size_t i = 0; i < y32.size(); ++i) ref.dlogits[i] *= 1 - (y32[i] / cap) * (y32[i] / cap);
  expect_tensor_close("softcap cross-entropy losses", dd().get32(loss, rows), ref.loss);
  expect_tensor_close("softcap cross-entropy dlogits", dd().get32(bl, rows * padded), ref.dlogits);
}

// ---- casts and whole-buffer utilities -----------------------------------------------------------
TEST_P(BackendOps, ConvertNearestAndStochasticAreTheCpuBits) {
  const int64_t n = 3001;
  Vec v = random_values(n, 37, 100.0);
  v[0] = 0.0, v[1] = -0.0, v[2] = 1e-8, v[3] = 70000.0, v[4] = INFINITY, v[5] = NAN;
  const Vec x = as_f32(v);
  Buffer bx = dd().f32(x);
  const uint64_t seed = 4242, offset = 1000003;
  for (DType t : {DType::kBF16, DType::kF16})
    for (Rounding rnd : {Rounding::kNearest, Rounding::kStochastic}) {
      Buffer out = dd().zeros(t, n);
      be().convert(T(out, t), T32(bx), n, rnd, seed, offset);
      const std::vector<uint16_t> got = dd().raw_get<uint16_t>(out, t, n);
      for (int64_t i = 0; i < n; ++i) {
        const float f = static_cast<float>(x[i]);
        const uint32_t bits = rounding_bits(seed, offset + static_cast<uint64_t>(i));
        uint16_t want;
        if (t == DType::kBF16)
          want = rnd == Rounding::kNearest ? f32_to_bf16(f) : f32_to_bf16_stochastic(f, bits);
        else
          want = rnd == Rounding::kNearest ? f32_to_f16(f) : f32_to_f16_stochastic(f, bits);
        ASSERT_EQ(got[i], want) << dtype_name(t)
                                << (rnd == Rounding::kNearest ? " nearest" : " stochastic")
                                << " element " << i << " value " << f;
      }
    }
  // Widening is exact.
  Buffer b16 = dd().bits16(testing::bf16_bits(x), DType::kBF16), back = dd().zeros(DType::kF32, 8);
  be().convert(T32(back), T(b16, DType::kBF16), 8);
  const Vec wide = dd().get32(back, 8), want = as_bf16(Vec(x.begin(), x.begin() + 8));
  for (int i = 0; i < 8; ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(wide[i]));
    } else {
      EXPECT_EQ(wide[i], want[i]) << i;
    }
  }
}

TEST_P(BackendOps, SumsFiniteScaleAccumulate) {
  const int64_t n = 100003;
  const Vec x = as_f32(random_values(n, 38));
  Buffer bx = dd().f32(x);
  double s = 0, s2 = 0;
  for (double v : x) s += v, s2 += v * v;
  EXPECT_NEAR(be().sum(T32(bx), n), s, 1e-9 * n);
  EXPECT_NEAR(be().sum_squares(T32(bx), n), s2, 1e-12 * s2 * 10);
  Buffer b16 = dd().bits16(testing::bf16_bits(x), DType::kBF16);
  double s2b = 0;
  for (double v : as_bf16(x)) s2b += v * v;
  EXPECT_NEAR(be().sum_squares(T(b16, DType::kBF16), n), s2b, 1e-11 * s2b);
  EXPECT_TRUE(be().all_finite(T32(bx), n));
  for (float bad : {INFINITY, -INFINITY, NAN}) {
    Vec y = x;
    y[n / 2 + 17] = bad;
    Buffer by = dd().f32(y);
    EXPECT_FALSE(be().all_finite(T32(by), n)) << bad;
  }
  be().scale(T32(bx), n, 0.5);
  Vec r(n);
  for (int64_t i = 0; i < n; ++i) r[i] = 0.5 * x[i];
  expect_tensor_close("scale", dd().get32(bx, n), r, 0, 0);
  Buffer acc = dd().bits16(testing::bf16_bits(x), DType::kBF16);
  be().accumulate(T(acc, DType::kBF16), T32(bx), n);
  for (int64_t i = 0; i < n; ++i) r[i] = as_bf16({x[i]})[0] + 0.5 * x[i];
  expect_tensor_close("accumulate into bf16", dd().get(acc, DType::kBF16, n), r, 1e-5, kRtolBf16);
}

// Kernels that reduce run twice: the second result must equal the first bit for bit.
TEST_P(BackendOps, BackwardReductionsAreBitwiseReproducible) {
  AttentionArgs a;
  a.batch = 2, a.seq = 40, a.channels = 32, a.heads = 2, a.dropout = 0.1, a.seed = 3;
  const int64_t nqkv = a.batch * a.seq * 96, nout = a.batch * a.seq * 32;
  Buffer bq = dd().f32(as_f32(random_values(nqkv, 39))),
         bdo = dd().f32(as_f32(random_values(nout, 40)));
  Buffer bo = dd().zeros(DType::kF32, nout),
         bl = dd().zeros(DType::kF32, a.batch * a.heads * a.seq);
  be().attention_forward(T32(bo), T32(bl), T32(bq), a);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    Buffer bdq = dd().zeros(DType::kF32, nqkv);
    be().attention_backward(T32(bdq), T32(bdo), T32(bq), T32(bo), T32(bl), a);
    Buffer gte = dd().zeros(DType::kF32, 7 * 32), gpe = dd().zeros(DType::kF32, 40 * 32);
    std::vector<int32_t> tokens(80);
    for (int i = 0; i < 80; ++i) tokens[i] = (i * 5) % 7;
    Buffer bt = dd().i32(tokens);
    be().embedding_backward(T32(gte), T32(gpe), T32(bdo), T(bt, DType::kI32), 2, 40, 32);
    std::vector<float> all = dd().raw_get<float>(bdq, DType::kF32, nqkv);
    for (const Buffer* b : {&gte, &gpe}) {
      auto v = dd().raw_get<float>(*b, DType::kF32, b == &gte ? 7 * 32 : 40 * 32);
      all.insert(all.end(), v.begin(), v.end());
    }
    runs.push_back(all);
  }
  ASSERT_EQ(runs[0].size(), runs[1].size());
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4), 0);
}

// ---- optimizer ops: each kind against the CPU backend on the same inputs ------------------------
struct OptimInputs {
  Vec w, g, s1, s2;
};

class OptimCase {
 public:
  OptimCase(Backend& be, DeviceData& dd, int64_t n, DType state, DType grad)
      : be_(be), dd_(dd), n_(n), state_(state), grad_(grad) {
    in_.w = as_f32(random_values(n, 41));
    in_.g = as_bf16(random_values(n, 42, 0.1));
    in_.s1 = as_bf16(random_values(n, 43, 0.01));
    for (double& v : in_.s1) v = std::fabs(v);  // also a second moment (Adafactor's vector v)
    in_.s2 = Vec(n);
    for (int64_t i = 0; i < n; ++i)
      in_.s2[i] = as_bf16({std::fabs(random_values(1, 44 + i)[0]) * 1e-3})[0];
  }
  // Runs `op` (tensors filled in here) on `be`; returns w, s1, s2 and the sums.
  std::vector<Vec> run(Backend& be, OptimOp op, bool with_s1, bool with_s2) {
    DeviceData d(be);
    Buffer w = d.f32(in_.w);
    Buffer g = grad_ == DType::kF32 ? d.f32(in_.g) : d.bits16(testing::bf16_bits(in_.g), grad_);
    auto state = [&](const Vec& v) {
      return state_ == DType::kF32 ? d.f32(v) : d.bits16(testing::bf16_bits(v), state_);
    };
    Buffer s1 = with_s1 ? state(in_.s1) : Buffer(), s2 = with_s2 ? state(in_.s2) : Buffer();
    op.w = T32(w), op.g = T(g, grad_), op.n = n_;
    if (with_s1) op.s1 = T(s1, state_);
    if (with_s2) op.s2 = T(s2, state_);
    double sums[2] = {0, 0};
    be.optimizer_op(op, sums);
    std::vector<Vec> out{d.get32(w, n_)};
    out.push_back(with_s1 ? d.get(s1, state_, n_) : Vec());
    out.push_back(with_s2 ? d.get(s2, state_, n_) : Vec());
    out.push_back({sums[0], sums[1]});
    return out;
  }
  void expect_same_as_cpu(const std::string& what, const OptimOp& op, bool s1, bool s2) {
    auto cpu_be = backend_create_cpu(2);
    const std::vector<Vec> ref = run(*cpu_be, op, s1, s2), got = run(be_, op, s1, s2);
    const double rtol = state_ == DType::kF32 ? testing::kRtol32 : kRtolBf16;
    expect_tensor_close(what + " w", got[0], ref[0]);
    if (s1) expect_tensor_close(what + " s1", got[1], ref[1], 1e-7, rtol);
    if (s2) expect_tensor_close(what + " s2", got[2], ref[2], 1e-9, rtol);
    for (int k = 0; k < 2; ++k)
      EXPECT_NEAR(got[3][k], ref[3][k], 1e-9 * (std::fabs(ref[3][k]) + 1e-30))
          << what << " sum " << k;
  }

 private:
  Backend& be_;
  DeviceData& dd_;
  int64_t n_;
  DType state_, grad_;
  OptimInputs in_;
};

TEST_P(BackendOps, OptimizerKindsMatchTheCpu) {
  const int64_t n = 20000;
  for (DType state : {DType::kF32, DType::kBF16})
    for (DType grad : {DType::kF32, DType::kBF16}) {
      OptimCase oc(be(), dd(), n, state, grad);
      const std::string tag =
          std::string(" state ") + dtype_name(state) + " grad " + dtype_name(grad);
      OptimOp op;
      op.grad_scale = 0.5;
      op.sgd = SgdStep<float>{0.05f, 0.9f, 0.01f, 0.999f, true};
      for (OptimOpKind k : {OptimOpKind::kSgdDecay, OptimOpKind::kSgdBuf, OptimOpKind::kSgdParam,
                            OptimOpKind::kSgdFused}) {
        op.kind = k;
        oc.expect_same_as_cpu("sgd kind " + std::to_string(static_cast<int>(k)) + tag, op, true,
                              false);
      }
      op.adamw = adamw_step_make<float>(1e-3, 0.9, 0.95, 1e-8, 0.1, 7);
      for (OptimOpKind k : {OptimOpKind::kAdamWDecay, OptimOpKind::kAdamWMoments,
                            OptimOpKind::kAdamWParam, OptimOpKind::kAdamWFused}) {
        op.kind = k;
        oc.expect_same_as_cpu("adamw kind " + std::to_string(static_cast<int>(k)) + tag, op, true,
                              true);
      }
      op.lamb = lamb_step_make<float>(0.9, 0.999, 1e-6, 0.01, 3);
      op.kind = OptimOpKind::kLambMoments;
      oc.expect_same_as_cpu("lamb moments" + tag, op, true, true);
      op.kind = OptimOpKind::kLambApply;
      op.scale = 0.01f;
      oc.expect_same_as_cpu("lamb apply" + tag, op, true, true);
      op.kind = OptimOpKind::kLarsNorms;
      oc.expect_same_as_cpu("lars norms" + tag, op, false, false);
      op.kind = OptimOpKind::kLarsApply;
      op.lars = LarsStep<float>{0.9f, 1e-4f, 0.02f};
      oc.expect_same_as_cpu("lars apply" + tag, op, true, false);
      op.adafactor = AdafactorStep<float>{0.8f, 0.2f, 1e-30f, 0.9f, 0.1f, 0.999f};
      op.kind = OptimOpKind::kAdafactorVector;
      oc.expect_same_as_cpu("adafactor vector" + tag, op, true, false);
      op.kind = OptimOpKind::kAdafactorApplyVector;
      op.u_scale = 0.7f, op.alpha = 0.01f;
      oc.expect_same_as_cpu("adafactor apply vector" + tag, op, true, true);
      // A slice [p0, p0 + n) of a matrix with 160 columns.
      const int64_t cols = 160, p0 = 250, rows = (p0 + n + cols - 1) / cols;
      std::vector<float> row_frac(rows), col(cols);
      for (int64_t r = 0; r < rows; ++r) row_frac[r] = 0.5f + 0.01f * static_cast<float>(r % 7);
      for (int64_t c = 0; c < cols; ++c) col[c] = 1e-4f * static_cast<float>(1 + c % 5);
      op.p0 = p0, op.cols = cols, op.row_frac = row_frac.data(), op.col = col.data();
      op.kind = OptimOpKind::kAdafactorFactoredU2;
      oc.expect_same_as_cpu("adafactor factored u2" + tag, op, false, false);
      op.kind = OptimOpKind::kAdafactorApplyFactored;
      oc.expect_same_as_cpu("adafactor apply factored" + tag, op, true, false);
      oc.expect_same_as_cpu("adafactor apply factored, no momentum" + tag, op, false, false);
      // Factored sums add into host row/column accumulators.
      std::vector<double> row_ref(rows, 0.25), col_ref(cols, 0.5), row_got = row_ref,
                                                                   col_got = col_ref;
      op.kind = OptimOpKind::kAdafactorFactoredSums;
      {
        auto cpu_be = backend_create_cpu(2);
        op.row_acc = row_ref.data(), op.col_acc = col_ref.data();
        const auto ref = oc.run(*cpu_be, op, false, false);
        op.row_acc = row_got.data(), op.col_acc = col_got.data();
        const auto got = oc.run(be(), op, false, false);
        EXPECT_NEAR(got[3][0], ref[3][0], 1e-9 * ref[3][0]) << "adafactor sum w^2" << tag;
        expect_tensor_close("adafactor row sums" + tag, row_got, row_ref, 0, 1e-12);
        expect_tensor_close("adafactor col sums" + tag, col_got, col_ref, 0, 1e-12);
      }
      op.row_acc = op.col_acc = nullptr;
    }
}

TEST_P(BackendOps, Adamw8bitMatchesTheCpu) {
  const int64_t n = 5000, block = 256, blocks = (n + block - 1) / block;
  const Vec w = as_f32(random_values(n, 50)), g = as_f32(random_values(n, 51, 0.1));
  std::vector<uint8_t> cm(n), cv(n);
  std::vector<float> am(blocks), av(blocks);
  {  // encode some moments with the CPU's encoder
    std::vector<float> m(n), v(n);
    for (int64_t i = 0; i < n; ++i)
      m[i] = 0.01f * static_cast<float>(g[i]), v[i] = 1e-4f * static_cast<float>(g[i] * g[i]);
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t len = std::min(block, n - b * block);
      quant_block_encode(quant_map_signed(), m.data() + b * block, len, cm.data() + b * block,
                         &am[b]);
      quant_block_encode(quant_map_unsigned(), v.data() + b * block, len, cv.data() + b * block,
                         &av[b]);
    }
  }
  auto run = [&](Backend& b) {
    DeviceData d(b);
    Buffer bw = d.f32(w), bg = d.f32(g), bcm = d.raw(cm.data(), DType::kU8, n),
           bcv = d.raw(cv.data(), DType::kU8, n), bam = d.f32(am), bav = d.f32(av);
    OptimOp op;
    op.kind = OptimOpKind::kAdamW8bit;
    op.w = T32(bw), op.g = T32(bg), op.s1 = T(bcm, DType::kU8), op.s2 = T(bcv, DType::kU8);
    op.a1 = T32(bam), op.a2 = T32(bav), op.n = n, op.block = block;
    op.adamw = adamw_step_make<float>(1e-3, 0.9, 0.999, 1e-8, 0.01, 5);
    b.optimizer_op(op, nullptr);
    return std::make_tuple(d.get32(bw, n), d.raw_get<uint8_t>(bcm, DType::kU8, n),
                           d.raw_get<uint8_t>(bcv, DType::kU8, n), d.get32(bam, blocks));
  };
  auto cpu_be = backend_create_cpu(2);
  const auto ref = run(*cpu_be);
  const auto got = run(be());
  expect_tensor_close("adamw8bit w", std::get<0>(got), std::get<0>(ref));
  expect_tensor_close("adamw8bit absmax m", std::get<3>(got), std::get<3>(ref));
  int64_t code_diffs = 0;
  for (int64_t i = 0; i < n; ++i)
    code_diffs +=
        (std::get<1>(got)[i] != std::get<1>(ref)[i]) + (std::get<2>(got)[i] != std::get<2>(ref)[i]);
  // The same functions on the same inputs: the codes agree (a rare tie could flip one code).
  EXPECT_LE(code_diffs, n / 1000) << "8-bit codes differing from the CPU's";
}

// TF32 (CUDA only): each operand keeps 10 mantissa bits, so a product is off by at most
// 2 * 2^-11 relative and the sum by 2^-10 * sum_p |a_ip b_pj| (plus fp32 rounding): an
// element-wise bound, checked as such.
// The configuration refuses tf32 off CUDA, so this case exists for the cuda backend only.
TEST(CudaOnlyOps, GemmTf32WithinItsRoundingBound) {
  if (!testing::cuda_device_present()) GTEST_SKIP() << testing::kNoCudaDevice;
  auto be_ptr = backend_create("cuda");
  Backend& be = *be_ptr;
  DeviceData dev(be);
  DeviceData* d = &dev;
  auto dd = [&]() -> DeviceData& { return *d; };
  auto be_ref = [&]() -> Backend& { return be; };
  const int64_t m = 64, n = 48, k = 96;
  const Vec a = as_f32(random_values(m * k, 9)), b = as_f32(random_values(k * n, 10));
  Buffer da = dd().f32(a), db = dd().f32(b), dc = dd().zeros(DType::kF32, m * n);
  GemmArgs g;
  g.a = T32(da), g.b = T32(db), g.c = T32(dc), g.m = m, g.n = n, g.k = k, g.tf32 = true;
  be_ref().gemm(g);
  Vec abs_sum;
  const Vec ref = naive_gemm(a, b, {}, {}, m, n, k, false, false, false, &abs_sum);
  const Vec got = dd().get32(dc, m * n);
  for (int64_t i = 0; i < m * n; ++i)
    ASSERT_LE(std::fabs(got[i] - ref[i]), 1e-5 + 1.1e-3 * abs_sum[i]) << "element " << i;
}

// sum_squares_fold against the separate ops it replaces (sum_squares, then copy or accumulate,
// then zero). Bitwise: its squares are summed by sum_squares' own chunk loop (cpu) or the same
// per-thread order and tree (cuda), and each element's fold is accumulate's addition. n spans
// four chunks, the last one partial; fp32, bf16 and fp64 buffers.
TEST_P(BackendOps, SumSquaresFoldMatchesSeparateOpsBitwise) {
  const int64_t n = 3 * 32768 + 1001;
  const Vec x = random_values(n, 61), y = random_values(n, 62);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF64}) {
    auto upload = [&](const Vec& v) {
      if (t == DType::kF32) return dd().f32(v);
      if (t == DType::kF64) return dd().f64(v);
      return dd().bits16(testing::bf16_bits(v), t);
    };
    for (SquaresFold fold : {SquaresFold::kMove, SquaresFold::kAddTo, SquaresFold::kAddFrom}) {
      const std::string what =
          std::string(dtype_name(t)) + " fold " + std::to_string(static_cast<int>(fold));
      Buffer fx = upload(x), fy = upload(y), sx = upload(x), sy = upload(y);
      const double got = be().sum_squares_fold(T(fx, t), T(fy, t), n, fold);
      const double want = be().sum_squares(T(sx, t), n);
      if (fold == SquaresFold::kAddFrom) {
        be().accumulate(T(sx, t), T(sy, t), n);
      } else {
        if (fold == SquaresFold::kMove)
          be().copy(T(sy, t), T(sx, t), n);
        else
          be().accumulate(T(sy, t), T(sx, t), n);
        be().zero(T(sx, t), n);
      }
      EXPECT_EQ(got, want) << what << ": sum of squares " << got << " against " << want;
      for (const auto& [f, s, name] : {std::tuple{&fx, &sx, "x"}, std::tuple{&fy, &sy, "y"}}) {
        const Vec a = dd().get(*f, t, n), b = dd().get(*s, t, n);
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; ++i)
          if (std::memcmp(&a[i], &b[i], sizeof(double)) != 0 && bad++ == 0) first = i;
        EXPECT_EQ(bad, 0) << what << ": " << name << " differs at " << bad << " elements, first at "
                          << first << " (" << a[first] << " against " << b[first] << ")";
      }
    }
  }
}

std::vector<std::string> backends_of_this_build() {
  std::vector<std::string> names{"cpu", "guard"};
  if (backend_names().find("cuda") != std::string::npos) names.push_back("cuda");
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllBackends, BackendOps, ::testing::ValuesIn(backends_of_this_build()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ledgerlm
