// optim.ema_half_life at the trainer level: the average sits beside training, so every step's
// loss, the master and the training weights are bitwise those of the run without it; evaluation
// puts the average into the compute copy and training resumes at exactly the weights it left; a
// half-life far below a step's tokens makes the average the master itself (the same evaluation
// bit for bit); fp32 params get a master apart from the compute copy, and precision.master =
// none is refused.
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

struct Trained {
  std::vector<double> losses;
  std::vector<float> master, training_weights, eval_weights;
  double eval_loss = 0.0;
  double train_loss_after_eval = 0.0;
};

// Eight steps of the tiny model, then one evaluation batch at the eval weights and one at the
// training weights after switching back.
Trained train_eight(double half_life) {
  RunConfig c = testing::tiny_config_make("adamw", 11);
  c.optim.lr = 1e-2;
  c.optim.ema_half_life = half_life;
  auto backend = backend_create_cpu(2);
  ModelState state(c, *backend);
  if (half_life > 0) {
    EXPECT_FALSE(state.placement().master_is_compute);
  }
  state.init_weights(static_cast<uint64_t>(c.train.seed));
  const int64_t B = c.train.micro_batch, T = c.train.seq_len, E = state.table().total;
  state.model().plan(B, T);
  static const std::vector<int32_t> corpus = testing::corpus_make(16);
  testing::CorpusBatches batches(corpus, 5, B, T,
                                 [](int64_t s, int64_t) { return static_cast<uint64_t>(s); });
  Trained out;
  for (int64_t s = 1; s <= 8; ++s)
    out.losses.push_back(train_step(state, batches, s, c.optim.lr).loss);
  out.master.assign(state.master(), state.master() + E);
  out.training_weights = host_floats(*backend, state.params(), E);
  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(inputs.size());
  testing::batch_fill(corpus, 99, 1, B, T, inputs.data(), targets.data());
  state.use_eval_weights(true);
  out.eval_weights = host_floats(*backend, state.params(), E);
  out.eval_loss = state.model().forward(state.units(), inputs.data(), targets.data(), B, T);
  state.use_eval_weights(false);
  EXPECT_EQ(host_floats(*backend, state.params(), E), out.training_weights)
      << "training resumes at exactly the weights it left";
  out.train_loss_after_eval =
      state.model().forward(state.units(), inputs.data(), targets.data(), B, T);
  return out;
}

TEST(TrainWeightAverage, TrainsExactlyAsWithoutItAndEvaluatesTheAverage) {
  const Trained plain = train_eight(0);
  const Trained averaged = train_eight(4096);  // many steps of the tiny config's tokens
  EXPECT_EQ(averaged.losses, plain.losses) << "the average must not touch training";
  EXPECT_EQ(averaged.master, plain.master);
  EXPECT_EQ(averaged.training_weights, plain.training_weights);
  EXPECT_EQ(plain.eval_weights, plain.training_weights) << "no average: evaluation at the master";
  double gap = 0.0;
  for (size_t i = 0; i < plain.master.size(); ++i)
    gap = std::max(gap, std::fabs(double(averaged.eval_weights[i]) - plain.master[i]));
  EXPECT_GT(gap, 1e-4) << "the average lags the iterates after 8 steps";
  EXPECT_NE(averaged.eval_loss, plain.eval_loss);
  EXPECT_EQ(averaged.train_loss_after_eval, plain.train_loss_after_eval);
  std::printf("eval loss: plain %.6f, averaged %.6f\n", plain.eval_loss, averaged.eval_loss);

  // A half-life of one token: the decay per step is 0.5^(tokens a step) ~ 1e-20 or less, so the
  // debiasing coefficient is 1 in double and each step's average is the master exactly.
  const Trained instant = train_eight(1.0);
  EXPECT_EQ(instant.eval_weights, plain.master);
  EXPECT_EQ(instant.eval_loss, plain.eval_loss);
}

TEST(TrainWeightAverage, NeedsAnFp32Master) {
  RunConfig c = testing::tiny_config_make("adamw", 11);
  c.optim.ema_half_life = 4096;
  c.precision.params = "bf16";
  c.precision.master = "none";
  auto backend = backend_create_cpu(1);
  EXPECT_NE(testing::error_of([&] {
              ModelState s(c, *backend);
            }).find("precision.master = none: optim.ema_half_life"),
            std::string::npos);
}

}  // namespace
}  // namespace ledgerlm
