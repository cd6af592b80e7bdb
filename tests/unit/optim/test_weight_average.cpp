// optim.ema_half_life (optim/weight_average.cpp): the debiased average of the master weights
// against the average computed in double from the definition; the inner optimizer's master and
// state bitwise those of the optimizer alone; its state component, view and bytes per parameter;
// and the config checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/check.h"
#include "optim/optim_traits.h"
#include "optim/optimizer.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

ParamTable test_table() {
  return testing::make_table({{"emb", {64, 24}, ParamKind::kEmbedding},
                              {"vec", {40}, ParamKind::kBias},
                              {"mat", {24, 32}, ParamKind::kMatrix}},
                             64, 1);
}

OptimConfig adamw(double half_life) {
  OptimConfig c;
  c.name = "adamw";
  c.lr = 0.01;
  c.ema_half_life = half_life;
  c.ema_decay = optim_ema_decay(half_life, 512);  // 512 tokens a step
  return c;
}

// Steps `opt` on `master` with fixed pseudo-random gradients; returns the master after each step.
std::vector<std::vector<float>> train(Optimizer& opt, const ParamTable& table,
                                      std::vector<float>& master, int steps) {
  std::vector<std::vector<float>> iterates;
  for (int s = 1; s <= steps; ++s) {
    std::vector<float> g = testing::random_flat(table, 100 + s, 0.1, 0.0f);
    OptimStepInfo info;
    info.lr = 0.01;
    info.step = s;
    opt.step(master.data(), Tensor(g.data(), DType::kF32), info);
    iterates.push_back(master);
  }
  return iterates;
}

// The average after t steps is sum_s d^(t-s) w_s / sum_s d^(t-s) over s = 1..t (the initial
// weights excluded), computed here in double from the iterates. The recursion rounds to fp32
// three times per step (scale, add, scale): after 12 steps the error is a few fp32 ulps of the
// weights (|w| <= ~1), so 1e-6 absolute bounds it with room and any wrong coefficient (an
// undebiased average, a decay off by a step) misses by 1e-3 or more.
TEST(WeightAverage, IsTheDebiasedAverageOfTheIteratesItsHalfLifeSets) {
  const ParamTable table = test_table();
  const OptimConfig c = adamw(2048);  // 4 steps of 512 tokens: d = 0.5^(1/4)
  ASSERT_NEAR(c.ema_decay, std::pow(0.5, 0.25), 1e-15);
  auto backend = backend_create_cpu(1);  // before the optimizer: its buffers outlive neither
  auto opt = optimizer_create(c);
  opt->init(table, 0, table.total, *backend);
  EXPECT_FALSE(opt->has_average()) << "nothing averaged before the first step";
  EXPECT_EQ(opt->averaged_weights(), nullptr);
  std::vector<float> master = testing::random_flat(table, 7, 0.5, 0.0f);
  const auto iterates = train(*opt, table, master, 12);
  ASSERT_TRUE(opt->has_average());
  const float* avg = opt->averaged_weights();
  ASSERT_NE(avg, nullptr);
  double worst = 0.0;
  int64_t at = -1;
  for (int64_t i = 0; i < table.total; ++i) {
    double num = 0.0, den = 0.0;
    for (size_t s = 0; s < iterates.size(); ++s) {
      const double w = std::pow(c.ema_decay, static_cast<double>(iterates.size() - 1 - s));
      num += w * iterates[s][static_cast<size_t>(i)];
      den += w;
    }
    const double err = std::abs(avg[i] - num / den);
    if (err > worst) worst = err, at = i;
  }
  EXPECT_LE(worst, 1e-6) << "worst element " << at;
}

// The average sits beside the optimizer: the master and the optimizer's own state are bitwise
// those of the optimizer alone (the same operations on the same values).
TEST(WeightAverage, LeavesTheOptimizersMasterAndStateBitwiseUnchanged) {
  const ParamTable table = test_table();
  auto b1 = backend_create_cpu(1), b2 = backend_create_cpu(1);
  auto plain = optimizer_create(adamw(0));
  auto averaged = optimizer_create(adamw(4096));
  plain->init(table, 0, table.total, *b1);
  averaged->init(table, 0, table.total, *b2);
  std::vector<float> m1 = testing::random_flat(table, 3, 0.5, 0.0f), m2 = m1;
  train(*plain, table, m1, 5);
  train(*averaged, table, m2, 5);
  EXPECT_EQ(m1, m2);
  const auto v1 = plain->state_views(), v2 = averaged->state_views();
  ASSERT_GT(v2.size(), v1.size());
  for (size_t k = 0; k < v1.size(); ++k) {
    ASSERT_EQ(v1[k].name, v2[k].name);
    ASSERT_EQ(v1[k].numel, v2[k].numel);
    const auto* a = static_cast<const float*>(v1[k].data);
    const auto* b = static_cast<const float*>(v2[k].data);
    EXPECT_EQ(std::vector<float>(a, a + v1[k].numel), std::vector<float>(b, b + v2[k].numel))
        << v1[k].name << " of tensor " << v1[k].param;
  }
  // Its own state: one fp32 "ema" view per tensor and the count of averaged steps.
  int ema = 0;
  for (size_t k = v1.size(); k < v2.size(); ++k) {
    if (v2[k].name == "ema") {
      ++ema;
      EXPECT_EQ(v2[k].dtype, DType::kF32);
    } else {
      EXPECT_EQ(v2[k].name, "ema_steps");
      EXPECT_EQ(static_cast<const double*>(v2[k].data)[0], 5.0);
    }
  }
  EXPECT_EQ(ema, 3);
  EXPECT_EQ(averaged->state_bytes_per_param(), plain->state_bytes_per_param() + 4.0);
  EXPECT_EQ(optim_state_bytes_per_param(adamw(4096)), optim_state_bytes_per_param(adamw(0)) + 4.0);
  bool listed = false;
  for (const StateComponent& comp : averaged->state_components())
    listed = listed ||
             (comp.name == "ema" && comp.tag == MemTag::kAverage && comp.bytes == 4 * table.total);
  EXPECT_TRUE(listed);
}

TEST(WeightAverage, ConfigChecksNameTheKey) {
  OptimConfig c = adamw(-1);
  EXPECT_NE(testing::error_of([&] { c.validate(); }).find("optim.ema_half_life"),
            std::string::npos);
  c = adamw(1000);
  c.name = "adamw_schedulefree";
  c.schedule = "constant";
  EXPECT_NE(testing::error_of([&] { c.validate(); }).find("already returns an average"),
            std::string::npos);
  c = adamw(1000);
  c.offload = "disk";
  EXPECT_NE(testing::error_of([&] { c.validate(); }).find("optim.offload = disk"),
            std::string::npos);
  EXPECT_EQ(optim_ema_decay(0, 512), 0.0);
  EXPECT_DOUBLE_EQ(optim_ema_decay(1024, 512), std::sqrt(0.5));
}

}  // namespace
}  // namespace ledgerlm
