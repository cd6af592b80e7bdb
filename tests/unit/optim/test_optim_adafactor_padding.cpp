// Adafactor on a token embedding padded past the vocabulary: the padding rows (zero weights,
// zero gradients) must not change the step of the real rows. Before the fix the RMS terms
// divided by the padded element count, shrinking RMS(w) by sqrt(V / Vp) and with it the step.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "optim/optimizer.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

constexpr int64_t kVocab = 65, kPadded = 128, kCols = 48;

// Three Adafactor steps (relative step, beta1 momentum, weight decay) on a (rows x kCols)
// embedding of which the first kVocab rows are real; returns the whole flat buffer.
std::vector<float> run(int64_t rows, int steps) {
  const ParamTable table =
      testing::make_table({{"wte", {rows, kCols}, ParamKind::kEmbedding, kVocab}});
  OptimConfig c;
  c.name = "adafactor";
  c.adafactor_beta1 = 0.9;
  c.weight_decay = 0.1;
  testing::TestBackend backend;
  auto opt = optimizer_create(c);
  opt->init(table, 0, table.total, backend);
  // The same real values whatever the padding: random_flat of the unpadded table, copied.
  const ParamTable real = testing::make_table({{"wte", {kVocab, kCols}, ParamKind::kEmbedding}});
  std::vector<float> w(static_cast<size_t>(table.total), 0.0f);
  const std::vector<float> w0 = testing::random_flat(real, 3, 0.02);
  std::copy(w0.begin(), w0.begin() + kVocab * kCols, w.begin());
  std::vector<float> g(w.size(), 0.0f);
  for (int t = 1; t <= steps; ++t) {
    const std::vector<float> gt = testing::random_flat(real, 100 + t, 1e-2);
    std::copy(gt.begin(), gt.begin() + kVocab * kCols, g.begin());
    OptimStepInfo info;
    info.lr = 0.0;  // relative step: the LR comes from the step count
    info.step = t;
    opt->step(w.data(), Tensor(g.data(), DType::kF32), info);
  }
  return w;
}

// Bitwise: the padded run visits the same real elements in the same order (row and column sums
// over the real rows, chunked sums over the same prefix), so nothing may differ.
TEST(OptimAdafactorPadding, PaddedEmbeddingStepsLikeTheUnpaddedTensor) {
  const std::vector<float> ref = run(kVocab, 3);
  const std::vector<float> got = run(kPadded, 3);
  const int64_t n = kVocab * kCols;
  auto r = testing::compare_tensor("wte real rows", got.data(), ref.data(), n, 0.0, 0.0);
  EXPECT_TRUE(r.ok) << r.message;
  EXPECT_EQ(std::memcmp(got.data(), ref.data(), static_cast<size_t>(n) * sizeof(float)), 0);
  for (int64_t i = n; i < kPadded * kCols; ++i)
    ASSERT_EQ(got[static_cast<size_t>(i)], 0.0f) << "padding element " << i << " moved";
  // Not vacuous: the weights moved by a few percent of their scale.
  const std::vector<float> w0 = run(kVocab, 0);
  double moved = 0.0;
  for (int64_t i = 0; i < n; ++i)
    moved = std::max(moved, static_cast<double>(std::fabs(ref[i] - w0[i])));
  EXPECT_GT(moved, 1e-4);
}

}  // namespace
}  // namespace ledgerlm
