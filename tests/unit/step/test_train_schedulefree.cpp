// Schedule-Free AdamW at the trainer level: the fp32 master holds x and the compute copy the
// training point y (they differ after a step), evaluation switches the compute copy to x and back
// to exactly the same y, and the loss at x differs from the loss at y (so evaluating at y, the
// mistake this guards against, would be visible). fp32 params need a master apart from the
// compute copy; precision.master = none and a decaying schedule are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "tests/support/test_util.h"
#include "tests/support/train_test_support.h"
#include "train/step/model_state.h"
#include "train/step/train_step.h"

namespace ledgerlm {
namespace {

using testing::host_floats;

double loss_now(ModelState& state, const std::vector<int32_t>& inputs,
                const std::vector<int32_t>& targets, int64_t B, int64_t T) {
  return state.model().forward(state.units(), inputs.data(), targets.data(), B, T);
}

TEST(TrainScheduleFree, MasterIsXComputeCopyIsYAndEvaluationUsesX) {
  RunConfig c = testing::tiny_config_make("adamw_schedulefree", 11);
  c.optim.lr = 1e-2;
  c.optim.schedule = "constant";
  c.optim.warmup_steps = 2;
  c.optim.weight_decay = 0.1;
  auto backend = backend_create_cpu(2);
  ModelState state(c, *backend);
  ASSERT_FALSE(state.placement().master_is_compute) << "fp32 params need a separate master";
  state.init_weights(static_cast<uint64_t>(c.train.seed));
  const int64_t B = c.train.micro_batch, T = c.train.seq_len, E = state.table().total;
  state.model().plan(B, T);
  static const std::vector<int32_t> corpus = testing::corpus_make(16);
  testing::CorpusBatches batches(corpus, 5, B, T,
                                 [](int64_t s, int64_t) { return static_cast<uint64_t>(s); });
  for (int64_t s = 1; s <= 8; ++s) train_step(state, batches, s, c.optim.lr);

  const std::vector<float> x(state.master(), state.master() + E);
  const std::vector<float> y = host_floats(*backend, state.params(), E);
  double gap = 0.0;
  for (int64_t i = 0; i < E; ++i) gap = std::max(gap, std::fabs(double(x[i]) - y[i]));
  EXPECT_GT(gap, 1e-4) << "x and y should be different points after 8 steps";

  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(inputs.size());
  testing::batch_fill(corpus, 99, 1, B, T, inputs.data(), targets.data());
  const double loss_y = loss_now(state, inputs, targets, B, T);
  state.use_eval_weights(true);
  EXPECT_EQ(std::memcmp(host_floats(*backend, state.params(), E).data(), x.data(), E * 4), 0)
      << "evaluation reads x (fp32: exactly the master)";
  const double loss_x = loss_now(state, inputs, targets, B, T);
  state.use_eval_weights(false);
  EXPECT_EQ(std::memcmp(host_floats(*backend, state.params(), E).data(), y.data(), E * 4), 0)
      << "training resumes at exactly the same y";
  std::printf("loss at x %.6f, at y %.6f\n", loss_x, loss_y);
  EXPECT_GT(std::fabs(loss_x - loss_y), 1e-6);
}

TEST(TrainScheduleFree, RefusesMasterNoneAndDecayingSchedules) {
  RunConfig c = testing::tiny_config_make("adamw_schedulefree", 11);
  c.optim.schedule = "constant";
  c.precision.params = "bf16";
  c.precision.master = "none";
  auto backend = backend_create_cpu(1);
  EXPECT_NE(testing::error_of([&] {
              ModelState s(c, *backend);
            }).find("precision.master = none: optim.name = adamw_schedulefree"),
            std::string::npos);
  c.precision.master = "fp32";
  c.optim.schedule = "cosine";
  EXPECT_NE(testing::error_of([&] {
              c.optim.validate();
            }).find("optim.schedule = cosine: adamw_schedulefree replaces the LR schedule"),
            std::string::npos);
}

}  // namespace
}  // namespace ledgerlm
