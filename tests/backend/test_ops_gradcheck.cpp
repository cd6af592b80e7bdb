// Finite-difference gradient checks of every backend op that has a backward, in fp64
// (activations and parameters fp64): linear layer (gemm + bias_backward), embedding, layernorm,
// GELU, attention (with and without dropout), softmax cross-entropy with a padded vocabulary,
// and dropout. Instantiated per backend name: cpu (label backend; the guard backend in the
// guard re-run) and, in a CUDA build, cuda (label cuda, "skipped: no CUDA device" without one).
// Inputs and outputs are host vectors staged through the backend's copies (HostStaging), so the
// same checks hold the device's fp64 kernels to the same bound.
//
// Each check uses loss = sum(out * w) with fixed random w, so dout = w, and compares the
// analytic gradient of every input against central differences with h = 1e-6.
// Tolerance atol 1e-7, rtol 1e-6: the central difference has truncation error O(h^2 f''') ~ 1e-12
// and rounding error O(eps |loss| / h) ~ 1e-16 * 10 / 1e-6 = 1e-9 for the O(1..10) losses here,
// both far below the bound, while a wrong term in a backward formula is O(1e-2) or larger.
// Parameter gradients are ACCUMULATED by contract: they start from random values and the check
// uses (after - before), which also tests the += semantics.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/rng.h"
#include "tests/support/backend_ops_support.h"
#include "tests/support/host_staging.h"

namespace ledgerlm {
namespace {

using Vec = std::vector<double>;
constexpr double kH = 1e-6;
constexpr double kAtol = 1e-7;
constexpr double kRtol = 1e-6;

Vec random_vec(int64_t n, uint64_t seed, double scale = 1.0) {
  return testing::random_values(n, seed, scale, /*site=*/77);
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

Vec minus(const Vec& a, const Vec& b) {
  Vec r(a.size());
  for (size_t i = 0; i < a.size(); ++i) r[i] = a[i] - b[i];
  return r;
}

// Compares `analytic` with central differences of loss() with respect to each element of x.
void check_grad(const std::string& name, Vec& x, const Vec& analytic,
                const std::function<double()>& loss) {
  ASSERT_EQ(x.size(), analytic.size()) << name;
  Vec numeric(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kH;
    const double lp = loss();
    x[i] = saved - kH;
    const double lm = loss();
    x[i] = saved;
    numeric[i] = (lp - lm) / (2 * kH);
  }
  testing::expect_tensor_close(name, analytic, numeric, kAtol, kRtol);
  // A gradient check of an all-zero gradient proves little: make sure there is signal.
  double max_abs = 0;
  for (double v : numeric) max_abs = std::max(max_abs, std::fabs(v));
  EXPECT_GT(max_abs, 1e-3) << name << ": numeric gradient is (nearly) zero";
}

using GradCheck = testing::OnNamedBackend;

TEST_P(GradCheck, LinearWithBias) {
  const int64_t m = 5, k = 4, n = 3;
  Vec x = random_vec(m * k, 1), w = random_vec(n * k, 2), b = random_vec(n, 3);
  Vec wout = random_vec(m * n, 4);
  auto forward = [&](Vec& out) {
    GemmArgs g;
    g.a = stage->up(x);
    g.b = stage->up(w);
    g.c = stage->up(out);
    g.bias = stage->up(b);
    g.m = m, g.n = n, g.k = k, g.trans_b = true;
    be->gemm(g);
    stage->down(out);
  };
  auto loss = [&] {
    Vec out(m * n, 123.0);  // overwritten: accumulate is off
    forward(out);
    return dot(out, wout);
  };
  // Backward: dx = dy W, dW += dy^T x, db += sum_rows dy.
  Vec dx(m * k, 99.0);
  Vec dw0 = random_vec(n * k, 5), db0 = random_vec(n, 6);
  Vec dw = dw0, db = db0;
  GemmArgs gx;
  gx.a = stage->up(wout), gx.b = stage->up(w), gx.c = stage->up(dx), gx.m = m, gx.n = k, gx.k = n;
  be->gemm(gx);
  stage->down(dx);
  GemmArgs gw;
  gw.a = stage->up(wout), gw.b = stage->up(x), gw.c = stage->up(dw), gw.m = n, gw.n = k, gw.k = m;
  gw.trans_a = true, gw.accumulate = true;
  be->gemm(gw);
  stage->down(dw);
  be->bias_backward(stage->up(db), stage->up(wout), m, n);
  stage->down(db);
  check_grad("linear dx", x, dx, loss);
  check_grad("linear dW", w, minus(dw, dw0), loss);
  check_grad("linear db", b, minus(db, db0), loss);
}

TEST_P(GradCheck, Embedding) {
  const int64_t batch = 2, seq = 3, c = 4, vocab = 5;
  std::vector<int32_t> tokens = {1, 3, 1, 4, 1, 0};  // repeated tokens exercise the grouping
  Vec wte = random_vec(vocab * c, 7), wpe = random_vec(seq * c, 8);
  Vec wout = random_vec(batch * seq * c, 9);
  auto loss = [&] {
    Vec out(batch * seq * c);
    be->embedding_forward(stage->up(out), stage->up(tokens), stage->up(wte), stage->up(wpe), batch,
                          seq, c);
    stage->down(out);
    return dot(out, wout);
  };
  Vec dwte0 = random_vec(vocab * c, 10), dwpe0 = random_vec(seq * c, 11);
  Vec dwte = dwte0, dwpe = dwpe0;
  be->embedding_backward(stage->up(dwte), stage->up(dwpe), stage->up(wout), stage->up(tokens),
                         batch, seq, c);
  stage->down(dwte);
  stage->down(dwpe);
  check_grad("embedding dwpe", wpe, minus(dwpe, dwpe0), loss);
  // Token 2 never occurs: its row must stay untouched (both gradients 0 there).
  check_grad("embedding dwte", wte, minus(dwte, dwte0), loss);
}

TEST_P(GradCheck, LayerNorm) {
  const int64_t rows = 3, c = 6;
  Vec x = random_vec(rows * c, 12, 2.0), w = random_vec(c, 13), b = random_vec(c, 14);
  Vec wout = random_vec(rows * c, 15);
  Vec mean(rows), rstd(rows);
  auto loss = [&] {
    Vec out(rows * c);
    be->layernorm_forward(stage->up(out), stage->up(mean), stage->up(rstd), stage->up(x),
                          stage->up(w), stage->up(b), rows, c);
    stage->down(out);
    stage->down(mean);
    stage->down(rstd);
    return dot(out, wout);
  };
  loss();  // fills mean and rstd for backward
  Vec dx0 = random_vec(rows * c, 16), dw0 = random_vec(c, 17), db0 = random_vec(c, 18);
  Vec dx = dx0, dw = dw0, db = db0;
  be->layernorm_backward(stage->up(dx), stage->up(dw), stage->up(db), stage->up(wout), stage->up(x),
                         stage->up(w), stage->up(mean), stage->up(rstd), rows, c);
  stage->down(dx);
  stage->down(dw);
  stage->down(db);
  check_grad("layernorm dx", x, minus(dx, dx0), loss);
  check_grad("layernorm dweight", w, minus(dw, dw0), loss);
  check_grad("layernorm dbias", b, minus(db, db0), loss);
}

// model.norm: norm_forward / norm_backward, LayerNorm or RMSNorm with a given eps and
// the weight and the bias each optional (empty tensors: the norm has none, and no gradient).
void check_norm(Backend& be, testing::HostStaging& st, bool rms, bool has_w, bool has_b,
                double eps) {
  const int64_t rows = 3, c = 6;
  const std::string what = std::string(rms ? "rmsnorm" : "layernorm") + (has_w ? " w" : "") +
                           (has_b ? " b" : "") + " eps " + std::to_string(eps);
  Vec x = random_vec(rows * c, 22, 2.0), w = random_vec(c, 23), b = random_vec(c, 24);
  Vec wout = random_vec(rows * c, 25);
  Vec mean(rows), rstd(rows);
  const NormArgs args{rms, eps, rows, c};
  auto loss = [&] {
    Vec out(rows * c);
    be.norm_forward(st.up(out), rms ? Tensor() : st.up(mean), st.up(rstd), st.up(x),
                    has_w ? st.up(w) : Tensor(), has_b ? st.up(b) : Tensor(), args);
    st.down(out);
    if (!rms) st.down(mean);
    st.down(rstd);
    return dot(out, wout);
  };
  loss();  // fills mean and rstd for backward
  Vec dx0 = random_vec(rows * c, 26), dw0 = random_vec(c, 27), db0 = random_vec(c, 28);
  Vec dx = dx0, dw = dw0, db = db0;
  be.norm_backward(st.up(dx), has_w ? st.up(dw) : Tensor(), has_b ? st.up(db) : Tensor(),
                   st.up(wout), st.up(x), has_w ? st.up(w) : Tensor(), rms ? Tensor() : st.up(mean),
                   st.up(rstd), args);
  st.down(dx);
  if (has_w) st.down(dw);
  if (has_b) st.down(db);
  check_grad(what + " dx", x, minus(dx, dx0), loss);
  if (has_w) check_grad(what + " dweight", w, minus(dw, dw0), loss);
  if (has_b) check_grad(what + " dbias", b, minus(db, db0), loss);
}

TEST_P(GradCheck, RmsNormWithAndWithoutWeight) {
  check_norm(*be, *stage, true, true, false, 1e-6);
  check_norm(*be, *stage, true, false, false, 0.5);  // an eps that moves the result
}
TEST_P(GradCheck, NormLayerNormWithoutWeightOrBias) {
  check_norm(*be, *stage, false, true, true, 1e-5);
  check_norm(*be, *stage, false, true, false, 0.5);
  check_norm(*be, *stage, false, false, true, 1e-3);
  check_norm(*be, *stage, false, false, false, 1e-5);
}

TEST_P(GradCheck, Gelu) {
  const int64_t n = 40;
  Vec x = random_vec(n, 19, 2.0), wout = random_vec(n, 20);
  auto loss = [&] {
    Vec out(n);
    be->gelu_forward(stage->up(out), stage->up(x), n);
    stage->down(out);
    return dot(out, wout);
  };
  Vec dx(n, 5.0);
  be->gelu_backward(stage->up(dx), stage->up(x), stage->up(wout), n);
  stage->down(dx);
  check_grad("gelu dx", x, dx, loss);
}

void attention_gradcheck(Backend& be, testing::HostStaging& stage, int64_t batch, int64_t seq,
                         int64_t c, int64_t heads, double dropout, const std::string& name,
                         int64_t kv_heads = 0) {
  AttentionArgs a;
  a.batch = batch, a.seq = seq, a.channels = c, a.heads = heads;
  a.dropout = dropout, a.seed = 42, a.site = 7;
  a.kv_heads = kv_heads;
  Vec qkv = random_vec(batch * seq * a.qkv_width(), 21);
  Vec wout = random_vec(batch * seq * c, 22);
  Vec out(batch * seq * c), lse(batch * heads * seq);
  auto loss = [&] {
    be.attention_forward(stage.up(out), stage.up(lse), stage.up(qkv), a);
    stage.down(out);
    stage.down(lse);
    return dot(out, wout);
  };
  loss();
  Vec dqkv(qkv.size(), 77.0);  // written, not accumulated
  be.attention_backward(stage.up(dqkv), stage.up(wout), stage.up(qkv), stage.up(out), stage.up(lse),
                        a);
  stage.down(dqkv);
  check_grad(name + " dqkv", qkv, dqkv, loss);
}

TEST_P(GradCheck, Attention) {
  attention_gradcheck(*be, *stage, 2, 5, 8, 2, 0.0, "attention");
}

TEST_P(GradCheck, AttentionThreeHeads) {
  attention_gradcheck(*be, *stage, 1, 7, 12, 3, 0.0, "attention H=3");
}

TEST_P(GradCheck, AttentionDropout) {
  attention_gradcheck(*be, *stage, 2, 5, 8, 2, 0.3, "attention dropout");
}

// seq = 40 spans two query blocks of the tiled kernel (32 + 8): dK and dV collect from both.
TEST_P(GradCheck, AttentionAcrossQueryBlocks) {
  attention_gradcheck(*be, *stage, 1, 40, 8, 2, 0.2, "attention 2 query blocks, dropout");
}

// ---- attention variants (model.n_kv_head, model.position = rope, model.qk_norm) ----------------

// Grouped-query attention: a kv head's dk and dv sum over its query heads (4 on 2; 3 on 1 with
// dropout; 2 on 1 across two query blocks). On cuda: its kernels' fp64 path, dk and dv summed
// over a group by one warp per kv head and key row.
TEST_P(GradCheck, AttentionGroupedQuery) {
  attention_gradcheck(*be, *stage, 2, 5, 8, 4, 0.0, "attention H=4 KV=2", 2);
  attention_gradcheck(*be, *stage, 1, 6, 12, 3, 0.3, "attention H=3 KV=1 dropout", 1);
  attention_gradcheck(*be, *stage, 1, 40, 8, 2, 0.0, "attention H=2 KV=1 2 query blocks", 1);
}

// Rotary embedding of 3 heads (hd 4) at the start of rows 14 wide (the rest must stay as it
// was), 2 sequences of 3 rows from position 2: dx is the inverse rotation of dout.
TEST_P(GradCheck, RotaryEmbedding) {
  const int64_t rows = 6, seq = 3, pos0 = 2, heads = 3, hd = 4, stride = 14;
  const double theta = 50.0;
  Vec x = random_vec(rows * stride, 26), wout = random_vec(rows * stride, 27);
  auto loss = [&] {
    Vec y = x;
    be->rope(stage->up(y), rows, seq, pos0, heads, hd, stride, theta, false);
    stage->down(y);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = heads * hd; i < stride; ++i)
        EXPECT_EQ(y[r * stride + i], x[r * stride + i]) << "column " << i << " was touched";
    return dot(y, wout);
  };
  Vec dx = wout;
  be->rope(stage->up(dx), rows, seq, pos0, heads, hd, stride, theta, true);
  stage->down(dx);
  check_grad("rope dx", x, dx, loss);
  // Position pos0 + r % seq: row 0 is at position 2, so it is rotated (not the identity).
  Vec y = x;
  be->rope(stage->up(y), rows, seq, pos0, heads, hd, stride, theta, false);
  stage->down(y);
  EXPECT_GT(std::fabs(y[0] - x[0]), 1e-3);
}

// Weightless RMS norm of 2 heads (hd 5) in rows 12 wide, in place; backward from the output.
TEST_P(GradCheck, HeadRmsNorm) {
  const int64_t rows = 3, heads = 2, hd = 5, stride = 12;
  const double eps = 1e-6;
  Vec x = random_vec(rows * stride, 28, 2.0), wout = random_vec(rows * stride, 29);
  Vec y, rstd(rows * heads);
  auto loss = [&] {
    y = x;
    be->head_rmsnorm_forward(stage->up(y), stage->up(rstd), rows, heads, hd, stride, eps);
    stage->down(y);
    stage->down(rstd);
    return dot(y, wout);
  };
  loss();
  const Vec y_fwd = y, rstd_fwd = rstd;
  // Columns past the heads pass through unchanged: their gradient is dout itself.
  Vec dx = wout;
  be->head_rmsnorm_backward(stage->up(dx), stage->up(y_fwd), stage->up(rstd_fwd), rows, heads, hd,
                            stride);
  stage->down(dx);
  check_grad("head rmsnorm dx", x, dx, loss);
}

// No position table (model.position = rope): the embedding is wte's rows alone.
TEST_P(GradCheck, EmbeddingWithoutPositions) {
  const int64_t batch = 2, seq = 3, c = 4, vocab = 5;
  std::vector<int32_t> tokens = {1, 3, 1, 4, 1, 0};
  Vec wte = random_vec(vocab * c, 30), wout = random_vec(batch * seq * c, 31);
  auto loss = [&] {
    Vec out(batch * seq * c);
    be->embedding_forward(stage->up(out), stage->up(tokens), stage->up(wte), Tensor(), batch, seq,
                          c);
    stage->down(out);
    return dot(out, wout);
  };
  Vec dwte0 = random_vec(vocab * c, 32), dwte = dwte0;
  be->embedding_backward(stage->up(dwte), Tensor(), stage->up(wout), stage->up(tokens), batch, seq,
                         c);
  stage->down(dwte);
  check_grad("embedding dwte (no wpe)", wte, minus(dwte, dwte0), loss);
}

TEST_P(GradCheck, SoftmaxCrossEntropyPadded) {
  const int64_t rows = 4, vocab = 5, padded = 8;
  const double grad_scale = 0.7;  // loss = grad_scale * sum(losses)
  std::vector<int32_t> targets = {0, 4, 2, 2};
  Vec logits = random_vec(rows * padded, 23, 2.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = vocab; j < padded; ++j) logits[r * padded + j] = 50.0;  // must get no mass
  auto loss = [&] {
    Vec work = logits, losses(rows);
    be->softmax_cross_entropy(stage->up(losses), stage->up(work), stage->up(targets), rows, vocab,
                              padded, 0.0);
    stage->down(losses);
    stage->down(work);
    EXPECT_EQ(work, logits) << "grad_scale == 0 must leave the logits untouched";
    double s = 0;
    for (double l : losses) s += grad_scale * l;
    return s;
  };
  Vec grad = logits, losses(rows);
  be->softmax_cross_entropy(stage->up(losses), stage->up(grad), stage->up(targets), rows, vocab,
                            padded, grad_scale);
  stage->down(grad);
  check_grad("cross-entropy dlogits", logits, grad, loss);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = vocab; j < padded; ++j) EXPECT_EQ(grad[r * padded + j], 0.0);
}

TEST_P(GradCheck, Dropout) {
  const int64_t n = 64;
  const double p = 0.25;
  Vec x = random_vec(n, 24), wout = random_vec(n, 25);
  auto loss = [&] {
    Vec y = x;
    be->dropout(stage->up(y), n, p, DropoutKey{5, 9, 0, n / 4});
    stage->down(y);
    return dot(y, wout);
  };
  // Backward of inverted dropout is the same masked scaling applied to dout.
  Vec dx = wout;
  be->dropout(stage->up(dx), n, p, DropoutKey{5, 9, 0, n / 4});
  stage->down(dx);
  check_grad("dropout dx", x, dx, loss);
}

INSTANTIATE_TEST_SUITE_P(Fp64, GradCheck, ::testing::ValuesIn(testing::cpu_and_cuda_backends()),
                         testing::backend_param_name);

}  // namespace
}  // namespace ledgerlm
