// Every vector path this CPU can run (avx512, avx2: cpu_isa.h) against the portable path, op by
// op and for a whole model's forward and backward, plus determinism per (threads, path). Paths
// the CPU cannot run report a skip naming the CPU's flags.
//
// Tolerances, all max|got - ref| <= atol + rtol * max|ref| per tensor:
//   - elementwise GELU and SwiGLU: 4e-6 + 4e-6: each path is within ~2e-6 relative of the fp64
//     value (test_ops_simd.cpp; SwiGLU's sigmoid is the same vector exp and one division), so
//     two paths are within twice that; ReLU squared is bitwise (a max and products);
//   - reductions over a row (layernorm, RMSNorm, softmax cross-entropy, attention): 2e-5 + 2e-5:
//   the same
//     fp32 sums in another order (vector lanes, FMA contraction), a few ulp of the partial sums;
//   - the model (2 layers, C 32): 1e-4 relative on the loss, 2e-4 + 2e-4 per gradient tensor.
// The 16-bit casts are bitwise: the vector conversions must equal the scalar ones for every
// non-NaN value (NaN stays NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/base/rng.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "tests/support/backend_ops_support.h"
#include "tests/support/config_test_support.h"

namespace ledgerlm {
namespace {

using cpu::CpuIsa;

const CpuIsa kVectorPaths[] = {CpuIsa::kAvx512, CpuIsa::kAvx2};

#define SKIP_UNLESS_SUPPORTED(isa)                                                            \
  if (!cpu::cpu_isa_supported(isa))                                                           \
  GTEST_SKIP() << "this CPU (" << cpu::cpu_model_name() << "; flags " << cpu::cpu_isa_flags() \
               << ") cannot run the " << cpu::cpu_isa_name(isa) << " path"

std::vector<float> uniform(int64_t n, uint64_t seed, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = rng_bits(seed, RngStream::kInit, 77, static_cast<uint64_t>(i))[0];
    v[i] = lo + (hi - lo) * static_cast<float>(bits >> 8) / 16777216.0f;
  }
  return v;
}

Tensor t32(std::vector<float>& v) {
  return Tensor(v.data(), DType::kF32);
}

using testing::expect_tensor_close;

class OpsIsa : public ::testing::TestWithParam<CpuIsa> {
 protected:
  void SetUp() override {
    SKIP_UNLESS_SUPPORTED(GetParam());
    be = cpu::backend_create_cpu_isa(2, GetParam());
    ref = cpu::backend_create_cpu_isa(2, CpuIsa::kPortable);
  }
  std::string path() const { return cpu::cpu_isa_name(GetParam()); }
  std::unique_ptr<Backend> be, ref;
};

TEST_P(OpsIsa, GeluMatchesPortable) {
  // 40,007 values over [-8, 8] plus extremes: several 16k chunks and a masked tail.
  std::vector<float> x = uniform(40007, 1, -8.0f, 8.0f);
  for (float v : {-1e4f, -100.0f, -30.0f, 0.0f, 30.0f, 100.0f, 1e4f}) x.push_back(v);
  const std::vector<float> g = uniform(static_cast<int64_t>(x.size()), 2, -1.0f, 1.0f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> out(n), out_ref(n), dx(n), dx_ref(n), gg = g;
  be->gelu_forward(t32(out), t32(x), n);
  ref->gelu_forward(t32(out_ref), t32(x), n);
  be->gelu_backward(t32(dx), t32(x), t32(gg), n);
  ref->gelu_backward(t32(dx_ref), t32(x), t32(gg), n);
  // The extremes (|x| up to 1e4) would make a global bound loose: compare the dense part.
  const int64_t dense = 40007;
  expect_tensor_close(path() + " gelu forward",
                      std::vector<float>(out.begin(), out.begin() + dense),
                      std::vector<float>(out_ref.begin(), out_ref.begin() + dense), 4e-6, 4e-6);
  expect_tensor_close(path() + " gelu backward", std::vector<float>(dx.begin(), dx.begin() + dense),
                      std::vector<float>(dx_ref.begin(), dx_ref.begin() + dense), 4e-6, 4e-6);
  for (int64_t i = dense; i < n; ++i) {
    EXPECT_NEAR(out[i], out_ref[i], 1e-6 * std::max(1.0f, std::fabs(x[i]))) << "x=" << x[i];
    EXPECT_NEAR(dx[i], dx_ref[i], 1e-6) << "x=" << x[i];
  }
}

// The MLP variants' activations (model.mlp = swiglu, relu2) against the portable loops, over
// several 16k chunks, a masked tail and the extremes where the sigmoid saturates; SwiGLU's
// backward also in place (dgate aliasing dout, as the model calls it).
TEST_P(OpsIsa, MlpActivationsMatchPortable) {
  std::vector<float> x = uniform(40007, 16, -8.0f, 8.0f);
  const int64_t dense = static_cast<int64_t>(x.size());
  for (float v : {-1e4f, -100.0f, -30.0f, 0.0f, 30.0f, 100.0f, 1e4f}) x.push_back(v);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> up = uniform(n, 17, -2.0f, 2.0f), g = uniform(n, 18, -1.0f, 1.0f);
  std::vector<float> out[2], dgate[2], dup[2], inplace[2], r2[2], dr2[2];
  Backend* bs[2] = {be.get(), ref.get()};
  for (int i = 0; i < 2; ++i) {
    out[i].resize(n), dgate[i].resize(n), dup[i].resize(n), r2[i].resize(n), dr2[i].resize(n);
    bs[i]->swiglu_forward(t32(out[i]), t32(x), t32(up), n);
    bs[i]->swiglu_backward(t32(dgate[i]), t32(dup[i]), t32(x), t32(up), t32(g), n);
    inplace[i] = g;
    bs[i]->swiglu_backward(t32(inplace[i]), t32(dup[i]), t32(x), t32(up), t32(inplace[i]), n);
    bs[i]->relu2_forward(t32(r2[i]), t32(x), n);
    bs[i]->relu2_backward(t32(dr2[i]), t32(x), t32(g), n);
  }
  EXPECT_EQ(inplace[0], dgate[0]) << "dgate aliasing dout";
  auto head = [&](const std::vector<float>& v) {
    return std::vector<float>(v.begin(), v.begin() + dense);
  };
  const std::string s = path() + " swiglu ";
  expect_tensor_close(s + "forward", head(out[0]), head(out[1]), 4e-6, 4e-6);
  expect_tensor_close(s + "dgate", head(dgate[0]), head(dgate[1]), 4e-6, 4e-6);
  expect_tensor_close(s + "dup", head(dup[0]), head(dup[1]), 4e-6, 4e-6);
  // Saturated: silu(g) is 0 or g, its derivative 0 or 1, as in the scalar loops.
  for (int64_t i = dense; i < n; ++i) {
    EXPECT_NEAR(out[0][i], out[1][i], 1e-6 * std::max(1.0f, std::fabs(x[i]))) << "x=" << x[i];
    EXPECT_NEAR(dgate[0][i], dgate[1][i], 1e-6) << "x=" << x[i];
    EXPECT_NEAR(dup[0][i], dup[1][i], 1e-6 * std::max(1.0f, std::fabs(x[i]))) << "x=" << x[i];
  }
  EXPECT_EQ(r2[0], r2[1]) << path() << " relu2 forward";
  EXPECT_EQ(dr2[0], dr2[1]) << path() << " relu2 backward";
}

// Every bf16/fp16 bit pattern widens to the scalar conversion's value; fp32 values (random bit
// patterns, ties, subnormals, overflow, inf) narrow to the scalar conversion's bits.
TEST_P(OpsIsa, CastsAreBitwiseTheScalarConversions) {
  const cpu::CpuKernels& k = cpu::cpu_kernels(GetParam());
  std::vector<uint16_t> h(65536 + 5);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(h.size());
  for (int fmt = 0; fmt < 2; ++fmt) {
    (fmt == 0 ? k.bf16_to_f32 : k.f16_to_f32)(wide.data(), h.data(),
                                              static_cast<int64_t>(h.size()));
    for (size_t i = 0; i < h.size(); ++i) {
      const float want = fmt == 0 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(wide[i])) << path() << " fmt " << fmt << " bits " << h[i];
      } else {
        EXPECT_EQ(std::memcmp(&want, &wide[i], 4), 0) << path() << " fmt " << fmt << " " << h[i];
      }
    }
  }
  std::vector<float> f;
  for (uint64_t i = 0; i < 200003; ++i) {
    uint32_t bits = rng_bits(3, RngStream::kInit, 5, i)[0];
    float v;
    std::memcpy(&v, &bits, 4);
    f.push_back(v);
  }
  for (float v : {0.0f, -0.0f, 1.0f + 0x1p-8f, 1.0f + 0x1p-11f, 65504.0f, 65520.0f, 1e-8f, 6e-8f,
                  3e-5f, 1e-40f, INFINITY, -INFINITY, NAN, 3.0e38f})
    f.push_back(v);
  std::vector<uint16_t> narrow(f.size());
  for (int fmt = 0; fmt < 2; ++fmt) {
    (fmt == 0 ? k.f32_to_bf16 : k.f32_to_f16)(narrow.data(), f.data(),
                                              static_cast<int64_t>(f.size()));
    int64_t bad = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      const uint16_t want = fmt == 0 ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
      if (narrow[i] != want && bad++ < 5)
        ADD_FAILURE() << path() << " fmt " << fmt << " value " << f[i] << ": got " << narrow[i]
                      << " want " << want;
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST_P(OpsIsa, LayerNormMatchesPortable) {
  for (int64_t c : {128, 384, 100}) {  // 100: not a multiple of the vector width
    const int64_t rows = 301;
    std::vector<float> x = uniform(rows * c, 4, -2.0f, 3.0f), w = uniform(c, 5, 0.5f, 1.5f),
                       b = uniform(c, 6, -0.5f, 0.5f), g = uniform(rows * c, 7, -1.0f, 1.0f);
    std::vector<float> out[2], mean[2], rstd[2], dx[2], dw[2], db[2];
    Backend* bs[2] = {be.get(), ref.get()};
    for (int i = 0; i < 2; ++i) {
      out[i].resize(rows * c), mean[i].resize(rows), rstd[i].resize(rows);
      dx[i].assign(rows * c, 0.25f), dw[i].assign(c, 0.0f), db[i].assign(c, 0.0f);
      bs[i]->layernorm_forward(t32(out[i]), t32(mean[i]), t32(rstd[i]), t32(x), t32(w), t32(b),
                               rows, c);
      bs[i]->layernorm_backward(t32(dx[i]), t32(dw[i]), t32(db[i]), t32(g), t32(x), t32(w),
                                t32(mean[i]), t32(rstd[i]), rows, c);
    }
    const std::string s = path() + " C" + std::to_string(c) + " layernorm ";
    expect_tensor_close(s + "out", out[0], out[1], 2e-5, 2e-5);
    expect_tensor_close(s + "mean", mean[0], mean[1], 2e-5, 2e-5);
    expect_tensor_close(s + "rstd", rstd[0], rstd[1], 2e-5, 2e-5);
    expect_tensor_close(s + "dx", dx[0], dx[1], 2e-5, 2e-5);
    expect_tensor_close(s + "dweight", dw[0], dw[1], 2e-5, 2e-5);
    expect_tensor_close(s + "dbias", db[0], db[1], 2e-5, 2e-5);
  }
}

// RMSNorm (model.norm = rmsnorm) with and without its weight, against the portable rows.
TEST_P(OpsIsa, RmsNormMatchesPortable) {
  for (int64_t c : {128, 384, 100}) {  // 100: not a multiple of the vector width
    for (bool weighted : {true, false}) {
      const int64_t rows = 301;
      std::vector<float> x = uniform(rows * c, 19, -2.0f, 3.0f), w = uniform(c, 20, 0.5f, 1.5f),
                         g = uniform(rows * c, 21, -1.0f, 1.0f);
      NormArgs args;
      args.rms = true, args.eps = 1e-6, args.rows = rows, args.channels = c;
      std::vector<float> out[2], rstd[2], dx[2], dw[2];
      Backend* bs[2] = {be.get(), ref.get()};
      for (int i = 0; i < 2; ++i) {
        out[i].resize(rows * c), rstd[i].resize(rows);
        dx[i].assign(rows * c, 0.25f), dw[i].assign(c, 0.0f);
        const Tensor wt = weighted ? t32(w) : Tensor(), dwt = weighted ? t32(dw[i]) : Tensor();
        bs[i]->norm_forward(t32(out[i]), Tensor(), t32(rstd[i]), t32(x), wt, Tensor(), args);
        bs[i]->norm_backward(t32(dx[i]), dwt, Tensor(), t32(g), t32(x), wt, Tensor(), t32(rstd[i]),
                             args);
      }
      const std::string s =
          path() + " C" + std::to_string(c) + (weighted ? " rmsnorm " : " weightless rmsnorm ");
      expect_tensor_close(s + "out", out[0], out[1], 2e-5, 2e-5);
      expect_tensor_close(s + "rstd", rstd[0], rstd[1], 2e-5, 2e-5);
      expect_tensor_close(s + "dx", dx[0], dx[1], 2e-5, 2e-5);
      if (weighted) expect_tensor_close(s + "dweight", dw[0], dw[1], 2e-5, 2e-5);
    }
  }
}

TEST_P(OpsIsa, CrossEntropyMatchesPortable) {
  for (int64_t vocab : {65, 256, 4099}) {
    const int64_t rows = 97, pv = (vocab + 63) / 64 * 64;
    const std::vector<float> logits = uniform(rows * pv, 8, -6.0f, 6.0f);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 37) % vocab);
    std::vector<float> x[2], loss[2], loss_only[2];
    const Tensor tgt(targets.data(), DType::kI32);
    Backend* bs[2] = {be.get(), ref.get()};
    for (int i = 0; i < 2; ++i) {
      x[i] = logits, loss[i].resize(rows), loss_only[i].resize(rows);
      bs[i]->softmax_cross_entropy(t32(loss_only[i]), t32(x[i]), tgt, rows, vocab, pv, 0.0);
      bs[i]->softmax_cross_entropy(t32(loss[i]), t32(x[i]), tgt, rows, vocab, pv, 0.5);
    }
    const std::string s = path() + " vocab " + std::to_string(vocab) + " cross-entropy ";
    expect_tensor_close(s + "loss", loss[0], loss[1], 2e-5, 2e-5);
    expect_tensor_close(s + "loss without gradient", loss_only[0], loss_only[1], 2e-5, 2e-5);
    expect_tensor_close(s + "dlogits", x[0], x[1], 2e-5, 2e-5);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = vocab; j < pv; ++j) ASSERT_EQ(x[0][r * pv + j], 0.0f) << "padding column";
  }
}

// The logit soft-cap (model.logit_softcap) and its cross-entropy against the portable loops:
// logits over [-40, 40] (capped at 15, so tanh runs from near-linear into saturation), a vocab
// that is not a multiple of the vector width, the target anywhere in a row (its correction
// lands in every lane position). The cap's tanh carries cap x ~6e-8 absolute error (1e-6 at
// cap 15): 2e-6 + 2e-6 on the capped logits; the row reductions 2e-5 + 2e-5 as above.
TEST_P(OpsIsa, SoftcapCrossEntropyMatchesPortable) {
  const double cap = 15.0;
  for (int64_t vocab : {65, 4099}) {
    const int64_t rows = 67, pv = (vocab + 63) / 64 * 64;
    const std::vector<float> logits = uniform(rows * pv, 22, -40.0f, 40.0f);
    std::vector<int32_t> targets(rows);
    for (int64_t r = 0; r < rows; ++r) targets[r] = static_cast<int32_t>((r * 53 + 7) % vocab);
    const Tensor tgt(targets.data(), DType::kI32);
    std::vector<float> y[2], loss[2], loss_only[2], y_only[2];
    Backend* bs[2] = {be.get(), ref.get()};
    for (int i = 0; i < 2; ++i) {
      y[i] = logits, loss[i].resize(rows), loss_only[i].resize(rows);
      bs[i]->softcap_forward(t32(y[i]), t32(y[i]), rows * pv, cap);
      y_only[i] = y[i];
      bs[i]->softcap_cross_entropy(t32(loss_only[i]), t32(y_only[i]), tgt, rows, vocab, pv, 0.0,
                                   cap);
      bs[i]->softcap_cross_entropy(t32(loss[i]), t32(y[i]), tgt, rows, vocab, pv, 0.5, cap);
    }
    const std::string s = path() + " vocab " + std::to_string(vocab) + " soft-capped ";
    std::vector<float> capped[2] = {y_only[0], y_only[1]};  // the logits without a gradient
    expect_tensor_close(s + "logits", capped[0], capped[1], 2e-6, 2e-6);
    expect_tensor_close(s + "loss", loss[0], loss[1], 2e-5, 2e-5);
    expect_tensor_close(s + "loss without gradient", loss_only[0], loss_only[1], 2e-5, 2e-5);
    expect_tensor_close(s + "dlogits", y[0], y[1], 2e-5, 2e-5);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = vocab; j < pv; ++j) ASSERT_EQ(y[0][r * pv + j], 0.0f) << "padding column";
  }
}

TEST_P(OpsIsa, AttentionMatchesPortable) {
  struct Case {
    int64_t b, t, c, h;
    double dropout;
  };
  // head_dim 64 and 32 run the vector products; 24 (not a multiple of 16) runs BLAS on avx512;
  // T = 80 spans three query blocks with a partial one; T = 37 (not a multiple of 8) takes the
  // transposes' edge loops and every partial row and column tile, with head_dim 16.
  for (const Case& cs : {Case{2, 80, 384, 6, 0.0}, Case{2, 64, 128, 4, 0.1},
                         Case{1, 40, 48, 2, 0.0}, Case{2, 37, 32, 2, 0.0}}) {
    AttentionArgs a;
    a.batch = cs.b, a.seq = cs.t, a.channels = cs.c, a.heads = cs.h, a.dropout = cs.dropout;
    a.seed = 9, a.site = 3;
    const int64_t n = cs.b * cs.t;
    std::vector<float> qkv = uniform(n * 3 * cs.c, 10, -1.5f, 1.5f),
                       dout = uniform(n * cs.c, 11, -1.0f, 1.0f);
    std::vector<float> out[2], lse[2], dqkv[2];
    Backend* bs[2] = {be.get(), ref.get()};
    for (int i = 0; i < 2; ++i) {
      out[i].resize(n * cs.c), lse[i].resize(cs.b * cs.h * cs.t), dqkv[i].resize(n * 3 * cs.c);
      bs[i]->attention_forward(t32(out[i]), t32(lse[i]), t32(qkv), a);
      bs[i]->attention_backward(t32(dqkv[i]), t32(dout), t32(qkv), t32(out[i]), t32(lse[i]), a);
    }
    const std::string s = path() + " attention hd " + std::to_string(cs.c / cs.h) + " ";
    expect_tensor_close(s + "out", out[0], out[1], 2e-5, 2e-5);
    expect_tensor_close(s + "lse", lse[0], lse[1], 2e-5, 2e-5);
    expect_tensor_close(s + "dqkv", dqkv[0], dqkv[1], 2e-5, 2e-5);
  }
}

// Same inputs, same (threads, path) => the same bits; and the elementwise and per-row results
// do not depend on the thread count at all.
TEST_P(OpsIsa, DeterministicPerThreadsAndPath) {
  auto one = cpu::backend_create_cpu_isa(1, GetParam());
  const int64_t n = 3 * 16384 + 5;
  std::vector<float> x = uniform(n, 12, -4.0f, 4.0f), o1(n), o2(n), o3(n);
  one->gelu_forward(t32(o1), t32(x), n);
  be->gelu_forward(t32(o2), t32(x), n);
  be->gelu_forward(t32(o3), t32(x), n);
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(o2, o3);
  AttentionArgs a;
  a.batch = 2, a.seq = 64, a.channels = 128, a.heads = 2;
  std::vector<float> qkv = uniform(128 * 384, 13, -1.0f, 1.0f), out1(128 * 128), out2(128 * 128),
                     l1(256), l2(256);
  one->attention_forward(t32(out1), t32(l1), t32(qkv), a);
  be->attention_forward(t32(out2), t32(l2), t32(qkv), a);
  EXPECT_EQ(out1, out2);
  EXPECT_EQ(l1, l2);
}

INSTANTIATE_TEST_SUITE_P(Paths, OpsIsa, ::testing::ValuesIn(kVectorPaths), [](const auto& info) {
  return std::string(cpu::cpu_isa_name(info.param));
});

// A whole model's loss and gradients on each vector path against the portable path.
TEST(OpsIsaModel, ForwardBackwardMatchesPortable) {
  ModelConfig cfg = testing::model_config_of({.vocab = 50, .L = 2, .H = 2, .C = 32, .block = 16});
  const ParamTable table = param_table_build(cfg);
  std::vector<float> params(static_cast<size_t>(table.total), 0.0f);
  for (const ParamInfo& p : table.params)
    for (int64_t i = 0; i < p.numel; ++i)
      params[p.offset + i] = p.kind == ParamKind::kNormWeight
                                 ? 1.0f + 0.1f * std::sin(static_cast<float>(i))
                                 : 0.2f * std::sin(0.7f * static_cast<float>(p.offset + i));
  const int64_t B = 4, T = 16;
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (int64_t i = 0; i < B * T; ++i) {
    tokens[i] = static_cast<int32_t>((i * 7) % cfg.vocab_size);
    targets[i] = static_cast<int32_t>((i * 11 + 3) % cfg.vocab_size);
  }
  auto run = [&](CpuIsa isa, std::vector<float>* grads) {
    auto be = cpu::backend_create_cpu_isa(2, isa);
    GptModel model(cfg, table, *be, DType::kF32, DType::kF32);
    grads->assign(static_cast<size_t>(table.total), 0.0f);
    ForwardOptions fo;
    fo.training = true;
    const double loss =
        model.forward(Tensor(params.data(), DType::kF32), tokens.data(), targets.data(), B, T, fo);
    model.backward(Tensor(params.data(), DType::kF32), Tensor(grads->data(), DType::kF32), 1.0);
    return loss;
  };
  std::vector<float> g_ref;
  const double loss_ref = run(CpuIsa::kPortable, &g_ref);
  for (CpuIsa isa : kVectorPaths) {
    if (!cpu::cpu_isa_supported(isa)) continue;
    std::vector<float> g;
    const double loss = run(isa, &g);
    EXPECT_NEAR(loss, loss_ref, 1e-4 * std::fabs(loss_ref)) << cpu::cpu_isa_name(isa);
    for (const ParamInfo& p : table.params) {
      auto r = testing::compare_tensor(std::string(cpu::cpu_isa_name(isa)) + " grad " + p.name,
                                       g.data() + p.offset, g_ref.data() + p.offset, p.numel, 2e-4,
                                       2e-4);
      EXPECT_TRUE(r.ok) << r.message;
    }
  }
}

// The elementwise kernels do the same operations per lane at both widths: avx2 and avx512 GELU,
// exp, SwiGLU, ReLU squared and the soft-cap agree bit for bit (a CPU with both paths checks it).
TEST(OpsIsaModel, ElementwiseIdenticalAcrossVectorWidths) {
  if (!cpu::cpu_isa_supported(CpuIsa::kAvx512)) GTEST_SKIP() << "needs both vector paths";
  const cpu::CpuKernels& a = cpu::cpu_kernels(CpuIsa::kAvx2);
  const cpu::CpuKernels& b = cpu::cpu_kernels(CpuIsa::kAvx512);
  const int64_t n = 10007;
  const std::vector<float> x = uniform(n, 14, -12.0f, 12.0f), g = uniform(n, 15, -1.0f, 1.0f);
  std::vector<float> fa(n), fb(n), da(n), db(n);
  a.gelu_forward(fa.data(), x.data(), n);
  b.gelu_forward(fb.data(), x.data(), n);
  a.gelu_backward(da.data(), x.data(), g.data(), n);
  b.gelu_backward(db.data(), x.data(), g.data(), n);
  EXPECT_EQ(fa, fb);
  EXPECT_EQ(da, db);
  // SwiGLU (gate x, up g) and ReLU squared likewise.
  std::vector<float> ua(n), ub(n);
  a.swiglu_forward(fa.data(), x.data(), g.data(), n);
  b.swiglu_forward(fb.data(), x.data(), g.data(), n);
  EXPECT_EQ(fa, fb) << "swiglu forward";
  a.swiglu_backward(da.data(), ua.data(), x.data(), g.data(), x.data(), n);
  b.swiglu_backward(db.data(), ub.data(), x.data(), g.data(), x.data(), n);
  EXPECT_EQ(da, db) << "swiglu dgate";
  EXPECT_EQ(ua, ub) << "swiglu dup";
  a.relu2_forward(fa.data(), x.data(), n);
  b.relu2_forward(fb.data(), x.data(), n);
  EXPECT_EQ(fa, fb) << "relu2 forward";
  a.relu2_backward(da.data(), x.data(), g.data(), n);
  b.relu2_backward(db.data(), x.data(), g.data(), n);
  EXPECT_EQ(da, db) << "relu2 backward";
  a.softcap_forward(fa.data(), x.data(), n, 5.0f, 0.2f);
  b.softcap_forward(fb.data(), x.data(), n, 5.0f, 0.2f);
  EXPECT_EQ(fa, fb) << "softcap forward";
  a.softcap_grad_row(fa.data(), n, 5.0f, 0.01f, 0.2f, 7, 0.5f);
  b.softcap_grad_row(fb.data(), n, 5.0f, 0.01f, 0.2f, 7, 0.5f);
  EXPECT_EQ(fa, fb) << "softcap gradient row";
}

TEST(OpsIsaSelection, OverrideNamesAndUnsupportedPaths) {
  CpuIsa isa;
  EXPECT_TRUE(cpu::cpu_isa_parse("avx2", &isa) && isa == CpuIsa::kAvx2);
  EXPECT_TRUE(cpu::cpu_isa_parse("portable", &isa) && isa == CpuIsa::kPortable);
  EXPECT_FALSE(cpu::cpu_isa_parse("sse9", &isa));
  EXPECT_TRUE(cpu::cpu_isa_supported(CpuIsa::kPortable));
  EXPECT_TRUE(cpu::cpu_isa_supported(cpu::cpu_isa_best()));
  for (CpuIsa p : kVectorPaths) {
    if (cpu::cpu_isa_supported(p)) continue;
    EXPECT_THROW(cpu::backend_create_cpu_isa(1, p), Error) << cpu::cpu_isa_name(p);
  }
}

}  // namespace
}  // namespace ledgerlm
