// The gradient noise scale (train.gns, train/step/gns.h):
// - the estimator against synthetic per-example gradients whose mean and covariance the test
//   knows exactly: averaged over many drawn batches, both estimates land on the truth;
// - the EMAs and B_simple as a ratio of EMAs (not an EMA of ratios);
// - the wiring in train_step at world 1 x accum 4 x micro 1 against a brute force over the four
//   sequences' own gradients (each through its own forward and backward);
// - the refusal at world 1 x accum 1, and the micro-batch buffer's allocation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/base/check.h"
#include "tests/support/train_test_support.h"
#include "train/step/gns.h"
#include "train/step/model_state.h"
#include "train/step/train_step.h"

namespace ledgerlm {
namespace {

using testing::corpus_make;

// A population of N per-example gradients in D dimensions (the "dataset"); batches of B are drawn
// from it with replacement, so E|g_B|^2 = |G|^2 + tr(Sigma) / B holds exactly with G the
// population mean and Sigma its covariance (normalized by N).
TEST(Gns, EstimatesAreUnbiasedOnSyntheticGradients) {
  constexpr int N = 64, D = 16, kSmall = 2, kBig = 8, kDraws = 40000;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<double>> examples(N, std::vector<double>(D));
  for (int i = 0; i < N; ++i)
    for (int d = 0; d < D; ++d)  // a mean of 0.5 per coordinate, noise of scale 1.5
      examples[i][d] = 0.5 + 1.5 * normal(rng);
  std::vector<double> mean(D, 0.0);
  for (const auto& e : examples)
    for (int d = 0; d < D; ++d) mean[d] += e[d] / N;
  double true_g2 = 0.0, true_trace = 0.0;
  for (int d = 0; d < D; ++d) true_g2 += mean[d] * mean[d];
  for (const auto& e : examples)
    for (int d = 0; d < D; ++d) true_trace += (e[d] - mean[d]) * (e[d] - mean[d]) / N;

  std::uniform_int_distribution<int> pick(0, N - 1);
  // The step's big batch is kBig / kSmall small batches (as micro-batches or ranks): the small
  // norm is the mean over them, the big one of their mean.
  double sum_g2 = 0, sum_g2_sq = 0, sum_tr = 0, sum_tr_sq = 0;
  for (int k = 0; k < kDraws; ++k) {
    std::vector<double> big(D, 0.0);
    double small_sq = 0.0;
    for (int s = 0; s < kBig / kSmall; ++s) {
      std::vector<double> small(D, 0.0);
      for (int b = 0; b < kSmall; ++b) {
        const auto& e = examples[static_cast<size_t>(pick(rng))];
        for (int d = 0; d < D; ++d) small[d] += e[d] / kSmall;
      }
      for (int d = 0; d < D; ++d) {
        small_sq += small[d] * small[d] / (kBig / kSmall);
        big[d] += small[d] / (kBig / kSmall);
      }
    }
    double big_sq = 0.0;
    for (int d = 0; d < D; ++d) big_sq += big[d] * big[d];
    const GnsEstimate e = gns_estimate(small_sq, kSmall, big_sq, kBig);
    sum_g2 += e.g2;
    sum_g2_sq += e.g2 * e.g2;
    sum_tr += e.trace;
    sum_tr_sq += e.trace * e.trace;
  }
  const double n = kDraws;
  const double mean_g2 = sum_g2 / n, mean_tr = sum_tr / n;
  const double se_g2 = std::sqrt((sum_g2_sq / n - mean_g2 * mean_g2) / n);
  const double se_tr = std::sqrt((sum_tr_sq / n - mean_tr * mean_tr) / n);
  std::printf("|G|^2: true %.5f, mean estimate %.5f (standard error %.5f)\n", true_g2, mean_g2,
              se_g2);
  std::printf("tr(Sigma): true %.5f, mean estimate %.5f (standard error %.5f)\n", true_trace,
              mean_tr, se_tr);
  // Unbiased: the mean of 40000 estimates is within 4 standard errors of the truth (a fixed seed,
  // so no flakiness; 4 SE would be crossed by chance with probability 6e-5). A biased estimator
  // such as |g_big|^2 for |G|^2 is off by tr(Sigma)/8 = ~4.4, about 300 standard errors here.
  EXPECT_NEAR(mean_g2, true_g2, 4 * se_g2);
  EXPECT_NEAR(mean_tr, true_trace, 4 * se_tr);
  EXPECT_GT(std::fabs(true_trace / kBig), 20 * se_g2) << "the check would not see that bias";
}

TEST(Gns, EstimateMatchesHandValues) {
  // |g_small|^2 = 5 at B 1, |g_big|^2 = 2 at B 4: |G|^2 = (8 - 5) / 3 = 1, tr = 3 / (3/4) = 4.
  const GnsEstimate e = gns_estimate(5.0, 1.0, 2.0, 4.0);
  EXPECT_DOUBLE_EQ(e.g2, 1.0);
  EXPECT_DOUBLE_EQ(e.trace, 4.0);
  EXPECT_THROW(gns_estimate(1.0, 4.0, 1.0, 4.0), Error);
}

TEST(Gns, BSimpleIsTheRatioOfTheEmas) {
  GnsTracker t(0.5);
  EXPECT_TRUE(std::isnan(t.b_simple()));
  t.update({1.0, 10.0});
  // Bias-corrected: after one update the EMAs are the first values.
  EXPECT_DOUBLE_EQ(t.g2_ema(), 1.0);
  EXPECT_DOUBLE_EQ(t.b_simple(), 10.0);
  t.update({3.0, 10.0});
  // Weights 1/3 and 2/3 after correction: g2 = 1/3 + 2 = 7/3, trace 10: B_simple = 30/7, where
  // the mean of the per-step ratios (10 and 10/3) would weight to 50/9.
  EXPECT_DOUBLE_EQ(t.g2_ema(), 7.0 / 3.0);
  EXPECT_DOUBLE_EQ(t.trace_ema(), 10.0);
  EXPECT_DOUBLE_EQ(t.b_simple(), 30.0 / 7.0);
}

RunConfig gns_config(int64_t micro, int64_t accum, bool gns) {
  RunConfig c = testing::tiny_config_make("sgd", 11);
  c.optim.lr = 0.1;
  c.train.micro_batch = micro;
  c.train.accum = accum;
  c.train.gns = gns;
  return c;
}

std::vector<double> host_gradients(ModelState& state) {
  const int64_t n = state.placement().grads_length;
  std::vector<float> f(static_cast<size_t>(n));
  state.backend().copy_to_host(f.data(), state.grads(), n);
  return std::vector<double>(f.begin(), f.end());
}

// World 1 x accum 4 x micro 1: B_small = 1 sequence, B_big = 4. The brute force runs each of the
// step's four sequences through its own forward and backward (loss scale 1) on a second state
// with the same initial weights, and forms |g_small|^2 (mean of the four squared norms) and
// |g_big|^2 (squared norm of their mean) in double.
TEST(Gns, TrainStepMatchesPerSequenceBruteForce) {
  const RunConfig cfg = gns_config(1, 4, true);
  const int64_t T = cfg.train.seq_len;
  static const std::vector<int32_t> corpus = corpus_make(16);
  auto index = [](int64_t s, int64_t m) { return static_cast<uint64_t>(s * 16 + m); };

  auto backend = backend_create_cpu(2);
  ModelState state(cfg, *backend);
  ASSERT_EQ(state.gns_source(), GnsSource::kMicroBatches);
  state.init_weights(11);
  state.model().plan(1, T);
  testing::CorpusBatches batches(corpus, 5, 1, T, index);
  const StepResult r = train_step(state, batches, 1, cfg.optim.lr);
  ASSERT_TRUE(r.gns);

  auto backend_ref = backend_create_cpu(2);
  ModelState ref(gns_config(1, 1, false), *backend_ref);
  ref.init_weights(11);
  ref.model().plan(1, T);
  testing::CorpusBatches ref_batches(corpus, 5, 1, T, index);
  std::vector<std::vector<double>> per_sequence;
  for (int64_t m = 0; m < 4; ++m) {
    const MicroBatch mb = ref_batches.micro_batch(1, m);
    ref.zero_grads();
    ForwardOptions fo;
    fo.training = true;
    fo.seed = 11;
    fo.step = 1;
    fo.first_sequence = mb.first_sequence;
    ref.model().forward(ref.units(), mb.inputs, mb.targets, 1, T, fo);
    ref.model().backward(ref.units(), 1.0);
    per_sequence.push_back(host_gradients(ref));
  }
  const size_t n = per_sequence[0].size();
  double small_sq = 0.0, big_sq = 0.0;
  for (size_t i = 0; i < n; ++i) {
    double mean = 0.0;
    for (const auto& g : per_sequence) {
      small_sq += g[i] * g[i] / 4.0;
      mean += g[i] / 4.0;
    }
    big_sq += mean * mean;
  }
  const GnsEstimate want = gns_estimate(small_sq, 1.0, big_sq, 4.0);
  std::printf("train_step: |G|^2 %.8g tr %.8g; brute force: |G|^2 %.8g tr %.8g; B_simple %.6g\n",
              r.gns_step.g2, r.gns_step.trace, want.g2, want.trace, r.b_simple);
  // fp32 gradients summed in another order (accumulated micro-batches against a double mean):
  // squared norms agree to ~1e-6 relative; the estimates are differences of them, so the
  // tolerance is 1e-4 of the larger squared norm (|g_small|^2) they are formed from.
  const double tol = 1e-4 * small_sq * 4.0 / 3.0;
  EXPECT_NEAR(r.gns_step.g2, want.g2, tol);
  EXPECT_NEAR(r.gns_step.trace, want.trace, tol * 4.0);
  EXPECT_NEAR(r.b_simple, want.trace / want.g2, 1e-3 * std::fabs(want.trace / want.g2));
  // The gradient the optimizer saw is the step's whole one: its norm is the brute force's mean.
  EXPECT_NEAR(r.grad_norm, std::sqrt(big_sq), 1e-5 * std::sqrt(big_sq));
}

// On or off, the step trains the same: the buffer only moves the sum aside (in another order).
TEST(Gns, TrainStepLossAndNormUnchangedByTheEstimator) {
  static const std::vector<int32_t> corpus = corpus_make(16);
  auto index = [](int64_t s, int64_t m) { return static_cast<uint64_t>(s * 16 + m); };
  double norms[2], losses[2];
  for (int on = 0; on < 2; ++on) {
    const RunConfig cfg = gns_config(2, 3, on == 1);
    auto backend = backend_create_cpu(2);
    ModelState state(cfg, *backend);
    state.init_weights(11);
    state.model().plan(2, cfg.train.seq_len);
    testing::CorpusBatches batches(corpus, 5, 2, cfg.train.seq_len, index);
    StepResult r;
    for (int64_t s = 1; s <= 2; ++s) r = train_step(state, batches, s, cfg.optim.lr);
    norms[on] = r.grad_norm;
    losses[on] = r.loss;
  }
  // Step 2's loss depends on step 1's update; the accumulated gradient is the same sum in
  // another association (a + b + c against (a + b) + c through a separate buffer), so fp32
  // rounding allows ~1e-6 relative.
  EXPECT_NEAR(losses[1], losses[0], 1e-5 * losses[0]);
  EXPECT_NEAR(norms[1], norms[0], 1e-5 * norms[0]);
}

// train.gns_interval = 3: only steps 3 and 6 measure, and their two estimates are all the EMAs
// have seen; the steps between train as with gns off (bitwise: the same code path), so the
// losses of steps 1-3 equal the gns-off run's exactly (step 3's loss comes before its update).
TEST(Gns, IntervalMeasuresEveryNthStepAndTrainsTheRestAsOff) {
  static const std::vector<int32_t> corpus = corpus_make(16);
  auto index = [](int64_t s, int64_t m) { return static_cast<uint64_t>(s * 16 + m); };
  std::vector<StepResult> runs[2];
  for (int on = 0; on < 2; ++on) {
    RunConfig cfg = gns_config(2, 3, on == 1);
    cfg.train.gns_interval = 3;
    auto backend = backend_create_cpu(2);
    ModelState state(cfg, *backend);
    state.init_weights(11);
    state.model().plan(2, cfg.train.seq_len);
    testing::CorpusBatches batches(corpus, 7, 2, cfg.train.seq_len, index);
    for (int64_t s = 1; s <= 6; ++s) runs[on].push_back(train_step(state, batches, s, 0.1));
  }
  const std::vector<StepResult>& on = runs[1];
  for (int64_t s = 1; s <= 6; ++s)
    EXPECT_EQ(on[static_cast<size_t>(s - 1)].gns, s % 3 == 0) << "step " << s;
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(on[i].loss, runs[0][i].loss) << "step " << i + 1;
  GnsTracker expect(gns_config(2, 3, true).train.gns_ema);
  expect.update(on[2].gns_step);
  expect.update(on[5].gns_step);
  EXPECT_DOUBLE_EQ(on[5].gns_g2_ema, expect.g2_ema());
  EXPECT_DOUBLE_EQ(on[5].b_simple, expect.b_simple());
}

TEST(Gns, RefusedAtWorldOneAccumOne) {
  auto backend = backend_create_cpu(1);
  try {
    ModelState state(gns_config(4, 1, true), *backend);
    FAIL() << "train.gns at world 1 x accum 1 was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::printf("%s\n", what.c_str());
    EXPECT_NE(what.find("train.gns: needs two batch sizes"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line";
  }
}

// The micro-batch buffer is allocated only when the estimator needs it, as workspace, the size
// of the gradients.
TEST(Gns, MicroBatchBufferOnlyWhenOn) {
  int64_t workspace[2] = {0, 0}, grads_bytes = 0;
  for (int on = 0; on < 2; ++on) {
    auto backend = backend_create_cpu(1);
    ModelState state(gns_config(2, 4, on == 1), *backend);
    workspace[on] = backend->tracker().usage(MemTag::kWorkspace).current;
    grads_bytes = backend->tracker().usage(MemTag::kGrads).current;
  }
  EXPECT_EQ(workspace[1] - workspace[0], grads_bytes);
}

}  // namespace
}  // namespace ledgerlm
