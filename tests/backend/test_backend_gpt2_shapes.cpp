// The ops of a GPT-2 124M training step at that model's shapes (C768, H12, T1024, vocab 50257
// padded to 50304, MLP 3072), each on a backend made by name against the CPU backend's fp32
// result on the same inputs: attention forward and backward, softmax cross-entropy with its
// gradient, embedding backward over many repeated tokens (the sorted path) with wpe, layernorm
// forward and backward, and the block's and the LM head's bf16 GEMMs (bf16_inputs) forward and
// both backward GEMMs with the bias gradient.
//
// Instances: `cuda` (label cuda; "skipped: no CUDA device" where none is visible) at the full
// shapes; `guard` (label backend: the CPU backend behind guarded memory, so the harness itself
// runs in CI) at the same shapes except where the CPU would be slow: the GEMMs run 128 rows
// instead of B*T = 2048 and the cross-entropy 256 rows instead of 2048 (every width, K and N stays
// the model's; under AddressSanitizer T is 256 and the rows fewer still). The guard instance
// computes what the CPU computes, so it agrees exactly; its value is that every case, upload,
// download and comparison runs here.
//
// Comparison per tensor: max|got - ref| <= atol + rtol * max|ref| (testing::compare_tensor),
// every tensor's line printed (the worst element and the bound), so a GPU run's log shows the
// margins. Each reference is first checked to be non-trivial (its largest magnitude above a
// floor and most elements non-zero): then a backend returning zeros misses by max|ref|, far
// over the bound, and NaN or garbage fails the comparison. Tolerances are stated per case.
// The guard instance takes about 10 s on 2 cores (ctest, OMP_WAIT_POLICY=PASSIVE).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backends/backend_factory.h"
#include "model/base/rng.h"
#include "tests/support/backend_ops_support.h"

namespace ledgerlm {
namespace {

using testing::DeviceData;
using testing::T;
using testing::T32;
using Floats = std::vector<float>;

// GPT-2 124M.
constexpr int64_t kC = 768, kHeads = 12, kSeq = 1024, kVocab = 50257, kVocabPadded = 50304;
constexpr int64_t kMlp = 4 * kC;

// n values uniform in [-sqrt(3), sqrt(3)) (mean 0, variance 1) times `scale`, four per draw of
// the counter RNG (so parallel draws are the same values). Uniform rather than normal: the
// comparisons do not care about the shape, and 100M+ normal draws (log and cos each) would cost
// the guard instance seconds.
Floats random_floats(int64_t n, uint64_t seed, double scale = 1.0) {
  Floats v(static_cast<size_t>(n));
  const double step = scale * 2.0 * std::sqrt(3.0) / 4294967296.0, low = -scale * std::sqrt(3.0);
#pragma omp parallel for schedule(static)
  for (int64_t q = 0; q < (n + 3) / 4; ++q) {
    const auto w = rng_bits(seed, RngStream::kInit, 92, static_cast<uint64_t>(q));
    for (int64_t j = 0; j < 4 && 4 * q + j < n; ++j)
      v[static_cast<size_t>(4 * q + j)] = static_cast<float>(low + step * w[j]);
  }
  return v;
}

// The start of an accumulated gradient: a cheap pattern in [-0.05, 0.05) (the LM head's and
// wte's 38.6M elements: random draws would cost seconds here and test nothing more).
Floats start_pattern(int64_t n) {
  Floats v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 1e-4f * static_cast<float>(static_cast<int64_t>((i * 2654435761u) % 1000) - 500);
  return v;
}

// The reference must carry signal: a largest magnitude of at least `floor` and at least
// `min_nonzero` of its elements non-zero. Only then does "max|got - ref| within the bound" rule
// out a backend that wrote nothing or zeros.
void expect_nontrivial(const std::string& what, const Floats& ref, double floor,
                       double min_nonzero = 0.5) {
  double max_abs = 0;
  int64_t nonzero = 0;
  for (float v : ref) {
    ASSERT_TRUE(std::isfinite(v)) << what << ": the reference is not finite";
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(v)));
    nonzero += v != 0.0f;
  }
  EXPECT_GE(max_abs, floor) << what << ": the reference is (nearly) zero";
  EXPECT_GE(static_cast<double>(nonzero), min_nonzero * static_cast<double>(ref.size()))
      << what << ": the reference is mostly zeros";
}

void expect_close(const std::string& what, const Floats& got, const Floats& ref, double atol,
                  double rtol) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const testing::CompareResult r = testing::compare_tensor(
      what, got.data(), ref.data(), static_cast<int64_t>(got.size()), atol, rtol);
  std::cout << (r.ok ? "  ok   " : "  FAIL ") << r.message << "\n";
  EXPECT_TRUE(r.ok) << r.message;
}

class Gpt2Shapes : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !testing::cuda_device_present())
      GTEST_SKIP() << testing::kNoCudaDevice;
    // 0 threads: every core (the CPU reference at full shape is the slow side on a GPU machine);
    // OMP_NUM_THREADS, which ctest sets to 2, still caps it here.
    be_ = backend_create(GetParam(), BackendOptions{0, 0});
    cpu_ = backend_create_cpu(0);
  }
  // The sizes that vary by instance (widths, K and N are always the model's).
  struct Sizes {
    int64_t seq, gemm_rows, ce_rows, embedding_batch;
  };
  Sizes sizes() const {
    if (GetParam() != "guard") return {kSeq, 2 * kSeq, 2 * kSeq, 16};
#if defined(__SANITIZE_ADDRESS__)
    // The sanitizer pass (scripts/test.sh, -O1 with AddressSanitizer) checks memory, not the
    // figures: T 256 and fewer rows keep it to seconds.
    return {256, 64, 64, 4};
#else
    return {kSeq, 128, 256, 16};
#endif
  }

  // Runs `op` on the CPU backend and on the backend under test; returns {ref, got}, each the
  // list of output tensors `op` downloaded.
  template <class Op>
  std::pair<std::vector<Floats>, std::vector<Floats>> on_both(Op op) {
    DeviceData ref_data(*cpu_), got_data(*be_);
    auto ref = op(*cpu_, ref_data);
    auto got = op(*be_, got_data);
    return {std::move(ref), std::move(got)};
  }

  std::unique_ptr<Backend> be_, cpu_;
};

Floats download(DeviceData& d, const Buffer& b, int64_t n) {
  return d.raw_get<float>(b, DType::kF32, n);
}

// ---- attention ------------------------------------------------------------------------------
// B2 H12 T1024 hd64, causal, fp32, no dropout. Tolerances: out and lse are softmax-weighted sums
// over up to T = 1024 keys, dqkv sums over up to 1024 queries (dK, dV) or keys (dQ), in another
// order on the device (tiles) with the device's exp. Measured on the CPU at these shapes, its
// fp32 result is within 2.5e-7 (out), 8e-8 (lse) and 3.5e-7 (dqkv) of max|ref| from an fp64
// run; a device as accurate differs from the CPU by at most the sum, about 1e-6, so the fp32
// convention rtol 1e-4 keeps a factor of 100, while a wrong term (a missing scale, a lost tile,
// a race) is O(1e-1) of max|ref|.
TEST_P(Gpt2Shapes, AttentionForwardBackward) {
  AttentionArgs a;
  a.batch = 2, a.seq = sizes().seq, a.channels = kC, a.heads = kHeads;
  const int64_t nqkv = a.batch * a.seq * 3 * kC, nout = a.batch * a.seq * kC;
  const int64_t nlse = a.batch * a.heads * a.seq;
  const Floats qkv = random_floats(nqkv, 1), dout = random_floats(nout, 2);
  auto [ref, got] = on_both([&](Backend& be, DeviceData& d) {
    Buffer bq = d.f32(qkv), bo = d.zeros(DType::kF32, nout), bl = d.zeros(DType::kF32, nlse);
    be.attention_forward(T32(bo), T32(bl), T32(bq), a);
    Buffer bdo = d.f32(dout), bdq = d.zeros(DType::kF32, nqkv);
    be.attention_backward(T32(bdq), T32(bdo), T32(bq), T32(bo), T32(bl), a);
    return std::vector<Floats>{download(d, bo, nout), download(d, bl, nlse),
                               download(d, bdq, nqkv)};
  });
  const char* names[3] = {"attention out", "attention lse", "attention dqkv"};
  for (int t = 0; t < 3; ++t) {
    expect_nontrivial(names[t], ref[t], 0.1);
    expect_close(names[t], got[t], ref[t], 1e-5, 1e-4);
  }
}

// ---- softmax cross-entropy ----------------------------------------------------------------------
// Rows B*T = 2048 (guard: 256) over V 50257 padded to 50304, logits of std 2 (a spread softmax
// with some peaked rows), the padded columns random too (they must be ignored), scale 1 / rows as
// the model passes it. Losses: log-sum-exp over 50257 terms in another order with the device's
// exp (the CUDA kernel sums in double); dlogits = scale * (softmax - onehot), max|ref| about
// scale. Measured on the CPU at these shapes: its fp32 losses are within 5e-8 and its dlogits
// within 3e-8 of max|ref| from an fp64 run; rtol 1e-4 (atol 1e-9, below the smallest
// gradients' scale * 1e-5) keeps a factor of 1000.
TEST_P(Gpt2Shapes, SoftmaxCrossEntropyWithGradient) {
  const int64_t rows = sizes().ce_rows;
  const double scale = 1.0 / static_cast<double>(rows);
  const Floats logits = random_floats(rows * kVocabPadded, 3, 2.0);
  std::vector<int32_t> targets(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    targets[static_cast<size_t>(r)] = static_cast<int32_t>((r * 7919 + 13) % kVocab);
  auto [ref, got] = on_both([&](Backend& be, DeviceData& d) {
    Buffer bl = d.f32(logits), bt = d.i32(targets), loss = d.zeros(DType::kF32, rows);
    be.softmax_cross_entropy(T32(loss), T32(bl), T(bt, DType::kI32), rows, kVocab, kVocabPadded,
                             scale);
    return std::vector<Floats>{download(d, loss, rows), download(d, bl, rows * kVocabPadded)};
  });
  expect_nontrivial("cross-entropy losses", ref[0], 1.0, 0.99);
  expect_nontrivial("cross-entropy dlogits", ref[1], 0.5 * scale, 0.9);
  expect_close("cross-entropy losses", got[0], ref[0], 1e-5, 1e-4);
  expect_close("cross-entropy dlogits", got[1], ref[1], 1e-9, 1e-4);
}

// ---- embedding backward ---------------------------------------------------------------------
// 16K tokens (B16 T1024) drawn from only 300 ids spread over the vocabulary, skewed so the most
// frequent id repeats about 2500 times (the device's sorted, deterministic path with long runs);
// dwte [50304 x 768] and dwpe [1024 x 768] start from random values (the += contract). A run of
// n rows sums n terms of O(1) in fp32: random-walk error sqrt(n) * eps of the terms, and both
// backends sum in position order (docs of cuda_embedding.cu), so rtol 1e-4 of max|ref| (about
// 150 here) has a wide margin; dwpe sums 16 rows.
TEST_P(Gpt2Shapes, EmbeddingBackwardManyRepeats) {
  const int64_t batch = sizes().embedding_batch, seq = sizes().seq, rows = batch * seq;
  std::vector<int32_t> tokens(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    auto w = rng_bits(5, RngStream::kInit, 93, static_cast<uint64_t>(r));
    const double u = static_cast<double>(w[0]) / 4294967296.0;
    const int64_t id = static_cast<int64_t>(300.0 * u * u * u);  // 0 is the most frequent
    tokens[static_cast<size_t>(r)] = static_cast<int32_t>((id * 167 + 11) % kVocab);
  }
  const Floats wte0 = start_pattern(kVocabPadded * kC);
  const Floats dout = random_floats(rows * kC, 6), wpe0 = random_floats(seq * kC, 8, 0.1);
  auto [ref, got] = on_both([&](Backend& be, DeviceData& d) {
    Buffer bt = d.i32(tokens), bdo = d.f32(dout), gte = d.f32(wte0), gpe = d.f32(wpe0);
    be.embedding_backward(T32(gte), T32(gpe), T32(bdo), T(bt, DType::kI32), batch, seq, kC);
    return std::vector<Floats>{download(d, gte, kVocabPadded * kC), download(d, gpe, seq * kC)};
  });
  // dwte: most rows keep their random start; the 300 touched rows carry the sums.
  expect_nontrivial("embedding dwte", ref[0], 10.0);
  expect_nontrivial("embedding dwpe", ref[1], 1.0);
  expect_close("embedding dwte", got[0], ref[0], 1e-5, 1e-4);
  expect_close("embedding dwpe", got[1], ref[1], 1e-5, 1e-4);
}

// ---- layernorm ----------------------------------------------------------------------------------
// Rows B*T = 2048 of C 768, x = 0.5 + 2 U (a mean to subtract; U of unit variance), weight
// 1 + 0.1 U, bias 0.1 U; dx, dweight, dbias accumulate into random starts. Row statistics sum 768
// terms and dweight / dbias sum 2048 rows, in other orders on the device: relative errors of a
// few 1e-6, against rtol 1e-4 (the op tests' fp32 tolerance).
TEST_P(Gpt2Shapes, LayernormForwardBackward) {
  const int64_t rows = 2 * sizes().seq, n = rows * kC;
  Floats x = random_floats(n, 9, 2.0);
  for (float& v : x) v += 0.5f;
  Floats w = random_floats(kC, 10, 0.1);
  for (float& v : w) v += 1.0f;
  const Floats bias = random_floats(kC, 11, 0.1), dout = random_floats(n, 12);
  const Floats dx0 = random_floats(n, 13), dw0 = random_floats(kC, 14), db0 = random_floats(kC, 15);
  auto [ref, got] = on_both([&](Backend& be, DeviceData& d) {
    Buffer bx = d.f32(x), bw = d.f32(w), bb = d.f32(bias), out = d.zeros(DType::kF32, n);
    Buffer mean = d.zeros(DType::kF32, rows), rstd = d.zeros(DType::kF32, rows);
    be.layernorm_forward(T32(out), T32(mean), T32(rstd), T32(bx), T32(bw), T32(bb), rows, kC);
    Buffer bdo = d.f32(dout), bdx = d.f32(dx0), bdw = d.f32(dw0), bdb = d.f32(db0);
    be.layernorm_backward(T32(bdx), T32(bdw), T32(bdb), T32(bdo), T32(bx), T32(bw), T32(mean),
                          T32(rstd), rows, kC);
    return std::vector<Floats>{download(d, out, n),     download(d, mean, rows),
                               download(d, rstd, rows), download(d, bdx, n),
                               download(d, bdw, kC),    download(d, bdb, kC)};
  });
  const char* names[6] = {"layernorm out", "layernorm mean",    "layernorm rstd",
                          "layernorm dx",  "layernorm dweight", "layernorm dbias"};
  for (int t = 0; t < 6; ++t) {
    expect_nontrivial(names[t], ref[t], 0.1, 0.99);
    expect_close(names[t], got[t], ref[t], 1e-5, 1e-4);
  }
}

// ---- bf16 GEMMs of the block and the LM head --------------------------------------------------
// precision.matmul = bf16 (bf16_inputs): both backends round A and B to bf16 the same way, so the
// products are the same exact values and only the fp32 summation order differs (tensor-core
// tiles, split-K on the device; blocks on the CPU), over K up to 50304 (the LM head's dx).
// Measured on the CPU at rows 2048: its fp32 sums are within 5.2e-7 of max|ref| from fp64 sums
// of the same bf16 operands for every shape here (qkv, fc-proj and the LM head, forward, dx and
// dW); rtol 1e-4, the fp32 convention, keeps a factor of 100 even for a device that truncates
// partial sums. Rows B*T = 2048 (guard: 128). Forward y = x W^T + b; backward dx = dy W and
// dW += dy^T x (into a random start), db += column sums of dy.
struct LinearShape {
  const char* name;
  int64_t in, out;
};

TEST_P(Gpt2Shapes, Bf16GemmsOfTheBlockAndLmHead) {
  const int64_t rows = sizes().gemm_rows;
  const LinearShape shapes[] = {{"qkv", kC, 3 * kC},
                                {"attn proj", kC, kC},
                                {"fc", kC, kMlp},
                                {"fc proj", kMlp, kC},
                                {"lm head", kC, kVocabPadded}};
  uint64_t seed = 20;
  for (const LinearShape& s : shapes) {
    const Floats x = random_floats(rows * s.in, seed++), wt = random_floats(s.out * s.in, seed++);
    const Floats b = random_floats(s.out, seed++), dy = random_floats(rows * s.out, seed++);
    const Floats dw0 = start_pattern(s.out * s.in), db0 = random_floats(s.out, seed++);
    auto [ref, got] = on_both([&](Backend& be, DeviceData& d) {
      Buffer bx = d.f32(x), bw = d.f32(wt), bb = d.f32(b), bdy = d.f32(dy);
      Buffer y = d.zeros(DType::kF32, rows * s.out), dx = d.zeros(DType::kF32, rows * s.in);
      Buffer dw = d.f32(dw0), db = d.f32(db0);
      GemmArgs g;  // y = x W^T + b
      g.a = T32(bx), g.b = T32(bw), g.c = T32(y), g.bias = T32(bb);
      g.m = rows, g.n = s.out, g.k = s.in, g.trans_b = true, g.bf16_inputs = true;
      be.gemm(g);
      GemmArgs gx;  // dx = dy W
      gx.a = T32(bdy), gx.b = T32(bw), gx.c = T32(dx);
      gx.m = rows, gx.n = s.in, gx.k = s.out, gx.bf16_inputs = true;
      be.gemm(gx);
      GemmArgs gw;  // dW += dy^T x
      gw.a = T32(bdy), gw.b = T32(bx), gw.c = T32(dw);
      gw.m = s.out, gw.n = s.in, gw.k = rows, gw.trans_a = true, gw.accumulate = true;
      gw.bf16_inputs = true;
      be.gemm(gw);
      be.bias_backward(T32(db), T32(bdy), rows, s.out);
      return std::vector<Floats>{download(d, y, rows * s.out), download(d, dx, rows * s.in),
                                 download(d, dw, s.out * s.in), download(d, db, s.out)};
    });
    const std::string what = std::string(s.name) + " " + std::to_string(s.in) + "->" +
                             std::to_string(s.out) + " rows " + std::to_string(rows);
    const char* parts[4] = {" y", " dx", " dW", " db"};
    for (int t = 0; t < 4; ++t) {
      expect_nontrivial(what + parts[t], ref[t], 1.0, 0.99);
      expect_close(what + parts[t], got[t], ref[t], 1e-5, 1e-4);
    }
  }
}

std::vector<std::string> backends_under_test() {
  std::vector<std::string> names{"guard"};
  if (backend_names().find("cuda") != std::string::npos) names.push_back("cuda");
  return names;
}

INSTANTIATE_TEST_SUITE_P(AgainstCpu, Gpt2Shapes, ::testing::ValuesIn(backends_under_test()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ledgerlm
