// Forward checks of the CPU backend ops against naive loops in double: GEMM (all transpose
// combinations, accumulate, bias, bf16/fp16 operands and outputs), attention (explicit T x T
// softmax, with and without dropout), layernorm, cross-entropy with padding, embedding,
// fp32-vs-fp64 consistency, and bitwise determinism of the backward reductions. The fp64
// references and the tolerance check are the backend op harness's (tests/support/).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/base/check.h"
#include "model/base/rng.h"
#include "tests/support/backend_ops_support.h"
#include "tests/support/reference_ops.h"

namespace ledgerlm {
namespace {

using testing::attention_dropout_scale;
using testing::expect_tensor_close;
using testing::naive_attention;
using testing::naive_gemm;
using Vec = std::vector<double>;
using VecF = std::vector<float>;

Vec random_vec(int64_t n, uint64_t seed, double scale = 1.0) {
  return testing::random_values(n, seed, scale, /*site=*/78);
}
VecF to_f32(const Vec& v) {
  return VecF(v.begin(), v.end());
}
Vec to_f64(const VecF& v) {
  return Vec(v.begin(), v.end());
}
Tensor t64(Vec& v) {
  return Tensor(v.data(), DType::kF64);
}
Tensor t32(VecF& v) {
  return Tensor(v.data(), DType::kF32);
}

class OpsForward : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> be = backend_create_cpu(2);
};

TEST_F(OpsForward, GemmAllTransposesAndAccumulate) {
  const int64_t m = 7, n = 5, k = 6;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int acc = 0; acc < 2; ++acc)
        for (int with_bias = 0; with_bias < 2; ++with_bias) {
          Vec a = random_vec(m * k, 1), b = random_vec(k * n, 2), c0 = random_vec(m * n, 3);
          Vec bias = with_bias ? random_vec(n, 4) : Vec();
          Vec ref = naive_gemm(a, b, c0, bias, m, n, k, ta, tb, acc);
          std::string name = "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) +
                             " acc=" + std::to_string(acc) + " bias=" + std::to_string(with_bias);
          // fp64: only rounding of a k=6 dot product, ~1e-15.
          Vec c = c0;
          GemmArgs g;
          g.a = t64(a), g.b = t64(b), g.c = t64(c), g.m = m, g.n = n, g.k = k;
          g.trans_a = ta, g.trans_b = tb, g.accumulate = acc;
          if (with_bias) g.bias = t64(bias);
          be->gemm(g);
          expect_tensor_close(name + " fp64", c, ref, 1e-13, 1e-13);
          // fp32: inputs O(1), k = 6 terms: a few ulps of fp32 (1.2e-7 each).
          VecF af = to_f32(a), bf = to_f32(b), cf = to_f32(c0), biasf = to_f32(bias);
          g.a = t32(af), g.b = t32(bf), g.c = t32(cf);
          if (with_bias) g.bias = t32(biasf);
          be->gemm(g);
          expect_tensor_close(name + " fp32", to_f64(cf), ref, 1e-5, 1e-6);
        }
}

TEST_F(OpsForward, GemmBf16WeightsMatchFp32WithRoundedWeights) {
  // Linear layer x[M,K] W[N,K]^T with W stored in bf16 vs fp32 holding the same bf16 values:
  // identical inputs to the same sgemm, so they must agree to fp32 rounding (in fact exactly).
  const int64_t m = 9, n = 11, k = 13;
  VecF x = to_f32(random_vec(m * k, 5)), wf = to_f32(random_vec(n * k, 6));
  VecF biasf = to_f32(random_vec(n, 7));
  std::vector<uint16_t> wb(n * k), biasb(n), wh(n * k);
  for (int64_t i = 0; i < n * k; ++i) {
    wb[i] = f32_to_bf16(wf[i]);
    wh[i] = f32_to_f16(wf[i]);
  }
  for (int64_t i = 0; i < n; ++i) biasb[i] = f32_to_bf16(biasf[i]);
  VecF w_rounded(n * k), w_half(n * k), bias_rounded(n);
  for (int64_t i = 0; i < n * k; ++i) w_rounded[i] = bf16_to_f32(wb[i]);
  for (int64_t i = 0; i < n * k; ++i) w_half[i] = f16_to_f32(wh[i]);
  for (int64_t i = 0; i < n; ++i) bias_rounded[i] = bf16_to_f32(biasb[i]);

  auto linear = [&](Tensor w, Tensor bias) {
    VecF y(m * n);
    GemmArgs g;
    g.a = t32(x), g.b = w, g.c = t32(y), g.bias = bias, g.m = m, g.n = n, g.k = k, g.trans_b = true;
    be->gemm(g);
    return to_f64(y);
  };
  // Without bf16_inputs the fp32 activations are used as they are: the bf16 weights are only
  // widened (exactly), so the result equals fp32 sgemm on the rounded weights.
  Vec ref = linear(t32(w_rounded), t32(bias_rounded));
  Vec got = linear(Tensor(wb.data(), DType::kBF16), Tensor(biasb.data(), DType::kBF16));
  expect_tensor_close("bf16-weight linear", got, ref, 1e-6, 1e-6);
  Vec ref_h = linear(t32(w_half), t32(bias_rounded));
  Vec got_h = linear(Tensor(wh.data(), DType::kF16), Tensor(biasb.data(), DType::kBF16));
  expect_tensor_close("fp16-weight linear", got_h, ref_h, 1e-6, 1e-6);
  EXPECT_GT(be->tracker().usage(MemTag::kWorkspace).current, 0) << "widened copies are workspace";

  // bf16 output with accumulate (a bf16 gradient): result = bf16(old + product), rounded once.
  std::vector<uint16_t> cb(m * n);
  Vec c0 = random_vec(m * n, 8);
  for (int64_t i = 0; i < m * n; ++i) cb[i] = f32_to_bf16(static_cast<float>(c0[i]));
  VecF cref(m * n);
  for (int64_t i = 0; i < m * n; ++i) cref[i] = bf16_to_f32(cb[i]);
  GemmArgs g;
  g.a = t32(x), g.b = t32(w_rounded), g.m = m, g.n = n, g.k = k, g.trans_b = true;
  g.accumulate = true;
  g.c = t32(cref);
  be->gemm(g);
  g.c = Tensor(cb.data(), DType::kBF16);
  be->gemm(g);
  int mismatches = 0;
  for (int64_t i = 0; i < m * n; ++i) mismatches += cb[i] != f32_to_bf16(cref[i]);
  EXPECT_EQ(mismatches, 0) << "bf16 C must equal round-to-nearest-even of the fp32 result";
}

TEST_F(OpsForward, AttentionMatchesExplicitSoftmax) {
  AttentionArgs a;
  a.batch = 2, a.seq = 9, a.channels = 12, a.heads = 3;
  Vec qkv = random_vec(a.batch * a.seq * 3 * a.channels, 9);
  const testing::AttentionRef ref = naive_attention(qkv, {}, a);
  const Vec &ref_out = ref.out, &ref_lse = ref.lse;
  Vec out(ref_out.size()), lse(ref_lse.size());
  be->attention_forward(t64(out), t64(lse), t64(qkv), a);
  // fp64 vs fp64 with a different summation order: ~1e-15 relative.
  expect_tensor_close("attention out fp64", out, ref_out, 1e-12, 1e-12);
  expect_tensor_close("attention lse fp64", lse, ref_lse, 1e-12, 1e-12);
  // fp32: O(1) inputs, sums of <= 9 terms and exp/log: a few fp32 ulps, well under 1e-5.
  VecF qf = to_f32(qkv), of(out.size()), lf(lse.size());
  be->attention_forward(t32(of), t32(lf), t32(qf), a);
  expect_tensor_close("attention out fp32 vs fp64 reference", to_f64(of), ref_out, 1e-5, 1e-5);
  expect_tensor_close("attention lse fp32 vs fp64 reference", to_f64(lf), ref_lse, 1e-5, 1e-5);
}

TEST_F(OpsForward, AttentionDropoutMaskFromCounterRng) {
  AttentionArgs a;
  a.batch = 2, a.seq = 6, a.channels = 8, a.heads = 2, a.dropout = 0.4, a.seed = 11, a.site = 3;
  a.first_sequence = 5;  // the mask follows the global sequence index, not the batch row
  Vec qkv = random_vec(a.batch * a.seq * 3 * a.channels, 10);
  int64_t dropped = 0;
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < a.seq; ++i)
        for (int64_t j = 0; j <= i; ++j) dropped += attention_dropout_scale(a, b, h, i, j) == 0.0;
  EXPECT_GT(dropped, 0);
  const testing::AttentionRef ref = naive_attention(qkv, {}, a);
  const Vec &ref_out = ref.out, &ref_lse = ref.lse;
  Vec out(ref_out.size()), lse(ref_lse.size());
  be->attention_forward(t64(out), t64(lse), t64(qkv), a);
  expect_tensor_close("attention dropout out", out, ref_out, 1e-12, 1e-12);
  expect_tensor_close("attention dropout lse (undropped softmax)", lse, ref_lse, 1e-12, 1e-12);
}

// seq = 75 spans three query blocks of the tiled kernel (32 + 32 + 11 rows), so blocks that see
// earlier keys, the causal triangle inside each block and a partial last block are all covered,
// with and without dropout; one thread and two threads must give identical bits.
TEST_F(OpsForward, AttentionAcrossQueryBlocks) {
  for (const double dropout : {0.0, 0.25}) {
    AttentionArgs a;
    a.batch = 2, a.seq = 75, a.channels = 16, a.heads = 2, a.dropout = dropout, a.seed = 5,
    a.site = 9;
    Vec qkv = random_vec(a.batch * a.seq * 3 * a.channels, 31);
    const testing::AttentionRef ref = naive_attention(qkv, {}, a);
    const Vec &ref_out = ref.out, &ref_lse = ref.lse;
    Vec out(ref_out.size()), lse(ref_lse.size());
    be->attention_forward(t64(out), t64(lse), t64(qkv), a);
    // fp64 with a different summation order: ~1e-15 relative.
    expect_tensor_close("attention out fp64, 3 query blocks", out, ref_out, 1e-12, 1e-12);
    expect_tensor_close("attention lse fp64, 3 query blocks", lse, ref_lse, 1e-12, 1e-12);
    // fp32: sums of <= 75 O(1) terms and exp/log: well under 1e-5.
    VecF qf = to_f32(qkv), of(out.size()), lf(lse.size());
    be->attention_forward(t32(of), t32(lf), t32(qf), a);
    expect_tensor_close("attention out fp32, 3 query blocks", to_f64(of), ref_out, 1e-5, 1e-5);
    expect_tensor_close("attention lse fp32, 3 query blocks", to_f64(lf), ref_lse, 1e-5, 1e-5);

    auto one = backend_create_cpu(1);
    VecF dout = to_f32(random_vec(of.size(), 32)), of1(of.size()), lf1(lf.size());
    one->attention_forward(t32(of1), t32(lf1), t32(qf), a);
    EXPECT_EQ(0, std::memcmp(of.data(), of1.data(), of.size() * 4)) << "forward, 1 vs 2 threads";
    VecF d2(qf.size()), d1(qf.size());
    be->attention_backward(t32(d2), t32(dout), t32(qf), t32(of), t32(lf), a);
    one->attention_backward(t32(d1), t32(dout), t32(qf), t32(of), t32(lf), a);
    EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * 4)) << "backward, 1 vs 2 threads";
  }
}

// The fp32 attention runs register-tiled AVX-512 block kernels (head_dim a multiple of 16, on
// CPUs with AVX-512) or BLAS otherwise; fp64 always runs BLAS and is what the gradient checks
// prove. fp32 out, lse and dqkv must match fp64 for head dims 16, 64 and 24 (BLAS fallback) over
// several query blocks, with dropout: sums of <= 75 O(1) terms carry ~sqrt(75) * 2^-24 relative
// rounding, exp/log a few ulps, so 2e-5 + 2e-5 max|ref| bounds them with margin while a wrong
// tile edge or a dropped term (an O(1) error) fails.
TEST_F(OpsForward, AttentionFp32MatchesFp64ForwardAndBackward) {
  struct Shape {
    int64_t batch, seq, c, heads;
  };
  for (const Shape sh : {Shape{2, 75, 32, 2}, Shape{1, 70, 128, 2}, Shape{1, 37, 48, 2}}) {
    AttentionArgs a;
    a.batch = sh.batch, a.seq = sh.seq, a.channels = sh.c, a.heads = sh.heads;
    a.dropout = 0.1, a.seed = 3, a.site = 4;
    const std::string what =
        "hd " + std::to_string(sh.c / sh.heads) + " T " + std::to_string(sh.seq);
    Vec qkv = random_vec(sh.batch * sh.seq * 3 * sh.c, 41);
    Vec dout = random_vec(sh.batch * sh.seq * sh.c, 42);
    Vec out(dout.size()), lse(sh.batch * sh.heads * sh.seq), dqkv(qkv.size());
    be->attention_forward(t64(out), t64(lse), t64(qkv), a);
    be->attention_backward(t64(dqkv), t64(dout), t64(qkv), t64(out), t64(lse), a);
    VecF qf = to_f32(qkv), df = to_f32(dout), of(out.size()), lf(lse.size()), dqf(qkv.size());
    be->attention_forward(t32(of), t32(lf), t32(qf), a);
    be->attention_backward(t32(dqf), t32(df), t32(qf), t32(of), t32(lf), a);
    expect_tensor_close("attention out fp32 vs fp64, " + what, to_f64(of), out, 2e-5, 2e-5);
    expect_tensor_close("attention lse fp32 vs fp64, " + what, to_f64(lf), lse, 2e-5, 2e-5);
    expect_tensor_close("attention dqkv fp32 vs fp64, " + what, to_f64(dqf), dqkv, 2e-5, 2e-5);
  }
}

TEST_F(OpsForward, LayerNormFp32MatchesFp64) {
  const int64_t rows = 17, c = 33;
  Vec x = random_vec(rows * c, 12, 3.0), w = random_vec(c, 13), b = random_vec(c, 14);
  for (int64_t i = 0; i < rows * c; ++i) x[i] += 5.0;  // an offset the two-pass variance handles
  Vec out(rows * c), mean(rows), rstd(rows);
  be->layernorm_forward(t64(out), t64(mean), t64(rstd), t64(x), t64(w), t64(b), rows, c);
  // Naive reference for the fp64 result.
  const Vec ref = testing::naive_layernorm(x, w, b, rows, c).out;
  expect_tensor_close("layernorm fp64 vs naive", out, ref, 1e-12, 1e-12);
  VecF xf = to_f32(x), wf = to_f32(w), bf = to_f32(b), of(rows * c), mf(rows), rf(rows);
  be->layernorm_forward(t32(of), t32(mf), t32(rf), t32(xf), t32(wf), t32(bf), rows, c);
  // fp32: normalised values O(1..3) after sums of 33 terms: ~1e-6 relative.
  expect_tensor_close("layernorm fp32 vs fp64", to_f64(of), out, 1e-5, 1e-5);
  expect_tensor_close("layernorm mean fp32 vs fp64", to_f64(mf), mean, 1e-5, 1e-6);
  expect_tensor_close("layernorm rstd fp32 vs fp64", to_f64(rf), rstd, 1e-5, 1e-5);
}

TEST_F(OpsForward, CrossEntropyPaddingGetsNoMass) {
  const int64_t rows = 3, vocab = 5, padded = 8;
  Vec logits = random_vec(rows * padded, 15, 3.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = vocab; j < padded; ++j) logits[r * padded + j] = 1e3;
  logits[0] = 800.0;  // a huge logit: the max-subtracted form stays finite
  std::vector<int32_t> targets = {0, 3, 4};
  const Vec ref = testing::naive_cross_entropy(logits, targets, rows, vocab, padded, 1.0).loss;
  Vec losses(rows), work = logits;
  be->softmax_cross_entropy(t64(losses), t64(work), Tensor(targets.data(), DType::kI32), rows,
                            vocab, padded, 2.0);
  expect_tensor_close("cross-entropy losses", losses, ref, 1e-12, 1e-12);
  for (int64_t r = 0; r < rows; ++r) {
    double row_sum = 0;
    for (int64_t j = 0; j < vocab; ++j) row_sum += work[r * padded + j];
    EXPECT_NEAR(row_sum, 0.0, 1e-12) << "2*(softmax - onehot) sums to 0 over the real vocab";
    for (int64_t j = vocab; j < padded; ++j) EXPECT_EQ(work[r * padded + j], 0.0);
  }
  std::vector<int32_t> bad = {0, 5, 1};  // 5 is a padding column, not a real token
  EXPECT_THROW(be->softmax_cross_entropy(t64(losses), t64(work), Tensor(bad.data(), DType::kI32),
                                         rows, vocab, padded, 0.0),
               Error);
}

TEST_F(OpsForward, EmbeddingBf16Tables) {
  const int64_t batch = 2, seq = 4, c = 8, vocab = 6;
  std::vector<int32_t> tokens = {5, 0, 5, 2, 1, 1, 3, 5};
  VecF te = to_f32(random_vec(vocab * c, 16)), pe = to_f32(random_vec(seq * c, 17));
  std::vector<uint16_t> teb(te.size()), peb(pe.size());
  for (size_t i = 0; i < te.size(); ++i) teb[i] = f32_to_bf16(te[i]);
  for (size_t i = 0; i < pe.size(); ++i) peb[i] = f32_to_bf16(pe[i]);
  VecF out(batch * seq * c);
  be->embedding_forward(t32(out), Tensor(tokens.data(), DType::kI32),
                        Tensor(teb.data(), DType::kBF16), Tensor(peb.data(), DType::kBF16), batch,
                        seq, c);
  Vec ref(out.size());
  for (int64_t r = 0; r < batch * seq; ++r)
    for (int64_t i = 0; i < c; ++i)
      ref[r * c + i] = static_cast<double>(bf16_to_f32(teb[tokens[r] * c + i]) +
                                           bf16_to_f32(peb[(r % seq) * c + i]));
  expect_tensor_close("embedding bf16", to_f64(out), ref, 0.0, 0.0);  // same fp32 additions: exact
}

// Runs attention and layernorm backward twice on the same inputs and demands identical bits.
TEST_F(OpsForward, BackwardIsBitwiseDeterministic) {
  AttentionArgs a;
  // Sizes above the kernels' parallel thresholds, so two threads really split the work.
  a.batch = 2, a.seq = 48, a.channels = 32, a.heads = 4, a.dropout = 0.1, a.seed = 1, a.site = 2;
  VecF qkv = to_f32(random_vec(a.batch * a.seq * 3 * a.channels, 18));
  VecF dout = to_f32(random_vec(a.batch * a.seq * a.channels, 19));
  VecF out(dout.size()), lse(a.batch * a.heads * a.seq);
  be->attention_forward(t32(out), t32(lse), t32(qkv), a);
  VecF d1(qkv.size()), d2(qkv.size());
  be->attention_backward(t32(d1), t32(dout), t32(qkv), t32(out), t32(lse), a);
  be->attention_backward(t32(d2), t32(dout), t32(qkv), t32(out), t32(lse), a);
  EXPECT_EQ(0, std::memcmp(d1.data(), d2.data(), d1.size() * 4)) << "attention backward";

  const int64_t rows = 1001, c = 40;
  VecF x = to_f32(random_vec(rows * c, 20)), w = to_f32(random_vec(c, 21));
  VecF g = to_f32(random_vec(rows * c, 22)), mean(rows), rstd(rows), y(rows * c), b(c);
  be->layernorm_forward(t32(y), t32(mean), t32(rstd), t32(x), t32(w), t32(b), rows, c);
  VecF dx1(rows * c), dw1(c), db1(c), dx2(rows * c), dw2(c), db2(c);
  be->layernorm_backward(t32(dx1), t32(dw1), t32(db1), t32(g), t32(x), t32(w), t32(mean), t32(rstd),
                         rows, c);
  be->layernorm_backward(t32(dx2), t32(dw2), t32(db2), t32(g), t32(x), t32(w), t32(mean), t32(rstd),
                         rows, c);
  EXPECT_EQ(0, std::memcmp(dx1.data(), dx2.data(), dx1.size() * 4)) << "layernorm dx";
  EXPECT_EQ(0, std::memcmp(dw1.data(), dw2.data(), dw1.size() * 4)) << "layernorm dweight";
  EXPECT_EQ(0, std::memcmp(db1.data(), db2.data(), db1.size() * 4)) << "layernorm dbias";
}

// Rotary positions: every row of a batch is rotated exactly as it would be alone (one row of
// sequence length 1 at its own position pos0 + r % seq), bit for bit, in fp64 and fp32. 53 rows
// of sequences of 5 (the last one partial), 3 heads of head_dim 160 (80 pairs: two passes of
// the kernel's pair chunks) in rows 500 wide, enough elements for the parallel loop.
TEST_F(OpsForward, RopeRowsMatchEachRowAlone) {
  const int64_t rows = 53, seq = 5, pos0 = 7, heads = 3, hd = 160, stride = 500;
  for (bool inverse : {false, true}) {
    const Vec x = random_vec(rows * stride, 41);
    Vec batch = x, alone = x;
    be->rope(t64(batch), rows, seq, pos0, heads, hd, stride, 500.0, inverse);
    for (int64_t r = 0; r < rows; ++r)
      be->rope(Tensor(alone.data() + r * stride, DType::kF64), 1, 1, pos0 + r % seq, heads, hd,
               stride, 500.0, inverse);
    EXPECT_EQ(batch, alone) << "fp64 inverse=" << inverse;
    VecF bf = to_f32(x), af = bf;
    be->rope(t32(bf), rows, seq, pos0, heads, hd, stride, 500.0, inverse);
    for (int64_t r = 0; r < rows; ++r)
      be->rope(Tensor(af.data() + r * stride, DType::kF32), 1, 1, pos0 + r % seq, heads, hd, stride,
               500.0, inverse);
    EXPECT_EQ(bf, af) << "fp32 inverse=" << inverse;
    EXPECT_NE(batch, x) << "rotated";
  }
}

}  // namespace
}  // namespace ledgerlm
