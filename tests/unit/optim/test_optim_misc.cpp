// Loss scaler, LR schedules, gradient-clip factor, config validation and the optimizer factory.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "model/base/check.h"
#include "optim/grad_clip.h"
#include "optim/loss_scaler.h"
#include "optim/optim_groups.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tests/support/config_test_support.h"

namespace ledgerlm {
namespace {

TEST(OptimScaler, BacksOffOnInfAndGrowsAfterInterval) {
  LossScalerConfig c;
  c.growth_interval = 3;
  LossScaler s(c);
  EXPECT_EQ(s.scale(), 65536.0);
  // An injected Inf gradient: the trainer's finiteness check says false.
  const float grad = std::numeric_limits<float>::infinity() * static_cast<float>(s.scale());
  s.update(std::isfinite(grad));
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.state().skipped_steps, 1);
  EXPECT_EQ(s.state().consecutive_skips, 1);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);  // not yet: 2 of 3 good steps
  EXPECT_EQ(s.state().consecutive_skips, 0);
  s.update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  EXPECT_EQ(s.state().good_steps, 0);
  // A skip resets the good-step count.
  s.update(true);
  s.update(true);
  s.update(false);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 32768.0);
  EXPECT_EQ(s.state().skipped_steps, 2);
}

TEST(OptimScaler, DefaultIntervalIs2000AndFloorIsMinScale) {
  LossScaler s;
  for (int i = 0; i < 1999; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 65536.0);
  s.update(true);
  EXPECT_EQ(s.scale(), 131072.0);
  for (int i = 0; i < 40; ++i) s.update(false);
  EXPECT_EQ(s.scale(), 1.0);
  EXPECT_EQ(s.state().consecutive_skips, 40);
}

TEST(OptimScaler, StaticNeverChangesAndStateRoundTrips) {
  LossScalerConfig c;
  c.dynamic = false;
  c.init_scale = 128.0;
  LossScaler s(c);
  s.update(false);
  for (int i = 0; i < 5000; ++i) s.update(true);
  EXPECT_EQ(s.scale(), 128.0);
  EXPECT_EQ(s.state().skipped_steps, 1);

  LossScaler d;
  d.update(false);
  d.update(true);
  LossScaler restored;
  restored.load_state(d.state());
  EXPECT_EQ(restored.scale(), d.scale());
  EXPECT_EQ(restored.state().good_steps, 1);
  LossScalerState bad;
  bad.scale = 0.0;
  EXPECT_THROW(restored.load_state(bad), Error);
  c.backoff = 1.5;
  EXPECT_THROW(LossScaler{c}, Error);
}

TEST(OptimSchedule, WarmupCosineShape) {
  OptimConfig c;
  c.lr = 1.0;
  c.schedule = "cosine";
  c.warmup_steps = 10;
  c.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(schedule_lr(c, 1, 110), 0.1);
  EXPECT_DOUBLE_EQ(schedule_lr(c, 5, 110), 0.5);
  EXPECT_DOUBLE_EQ(schedule_lr(c, 10, 110), 1.0);
  EXPECT_NEAR(schedule_lr(c, 60, 110), 0.55, 1e-12);  // halfway: floor + half the range
  EXPECT_DOUBLE_EQ(schedule_lr(c, 110, 110), 0.1);
  EXPECT_DOUBLE_EQ(schedule_lr(c, 500, 110), 0.1);  // held at the floor
  double prev = 2.0;
  for (int s = 10; s <= 110; ++s) {  // monotone non-increasing after warmup
    const double lr = schedule_lr(c, s, 110);
    EXPECT_LE(lr, prev + 1e-15);
    EXPECT_GE(lr, 0.1 - 1e-15);
    prev = lr;
  }
}

TEST(OptimSchedule, WarmupLinearAndConstant) {
  OptimConfig c;
  c.lr = 2.0;
  c.schedule = "linear";
  c.warmup_steps = 4;
  c.min_lr_ratio = 0.0;
  EXPECT_DOUBLE_EQ(schedule_lr(c, 2, 104), 1.0);
  EXPECT_NEAR(schedule_lr(c, 54, 104), 1.0, 1e-12);
  EXPECT_NEAR(schedule_lr(c, 79, 104), 0.5, 1e-12);
  EXPECT_DOUBLE_EQ(schedule_lr(c, 104, 104), 0.0);
  c.schedule = "constant";
  EXPECT_DOUBLE_EQ(schedule_lr(c, 3, 104), 1.5);
  EXPECT_DOUBLE_EQ(schedule_lr(c, 50, 104), 2.0);
  EXPECT_DOUBLE_EQ(schedule_lr(c, 104, 104), 2.0);
  c.warmup_steps = 0;
  EXPECT_DOUBLE_EQ(schedule_lr(c, 1, 104), 2.0);
}

TEST(OptimClip, Factor) {
  EXPECT_DOUBLE_EQ(grad_clip_factor(0.5, 1.0), 1.0);
  EXPECT_NEAR(grad_clip_factor(4.0, 1.0), 1.0 / (4.0 + 1e-6), 1e-15);
  EXPECT_DOUBLE_EQ(grad_clip_factor(4.0, 0.0), 1.0);  // off
  EXPECT_DOUBLE_EQ(grad_clip_factor(0.0, 1.0), 1.0);
  EXPECT_DOUBLE_EQ(grad_clip_factor(INFINITY, 1.0), 1.0);
}

// The error message names the key.
void expect_rejected(const OptimConfig& c, const std::string& key) {
  try {
    c.validate();
    ADD_FAILURE() << "accepted a bad " << key;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
  }
}

TEST(OptimConfigValidate, NamesTheOffendingKey) {
  OptimConfig ok;
  EXPECT_NO_THROW(ok.validate());
  OptimConfig c;
  c.name = "adam";
  expect_rejected(c, "optim.name");
  c = ok;
  c.impl = "vectorized";
  expect_rejected(c, "optim.impl");
  c = ok;
  c.name = "lamb";
  c.impl = "loop";
  expect_rejected(c, "optim.impl");
  c = ok;
  c.schedule = "step";
  expect_rejected(c, "optim.schedule");
  c = ok;
  c.wd_mode = "both";
  expect_rejected(c, "optim.wd_mode");
  c = ok;
  c.lr = -1e-3;
  expect_rejected(c, "optim.lr");
  c = ok;
  c.beta1 = 1.0;
  expect_rejected(c, "optim.beta1");
  c = ok;
  c.beta2 = -0.1;
  expect_rejected(c, "optim.beta2");
  c = ok;
  c.eps = 0.0;
  expect_rejected(c, "optim.eps");
  c = ok;
  c.block_size = 100;
  expect_rejected(c, "optim.block_size");
  c = ok;
  c.lamb_phi = "sqrt";
  expect_rejected(c, "optim.lamb_phi");
  c = ok;
  c.min_lr_ratio = 2.0;
  expect_rejected(c, "optim.min_lr_ratio");
}

// Schedule-Free's averaging weight lr_max^power: the authors use 2; past 16 (or at a power and LR
// whose lr^power underflows) every weight is 0 and the returned weights x never move, which
// trained to the end with exit 0 before this was refused.
TEST(OptimConfigValidate, ScheduleFreeWeightPowerIsBoundedTo16) {
  OptimConfig ok;
  ok.name = "adamw_schedulefree";
  ok.schedule = "constant";
  EXPECT_NO_THROW(ok.validate());
  OptimConfig c = ok;
  c.sf_weight_lr_power = 0.0;  // a plain average of the iterates
  EXPECT_NO_THROW(c.validate());
  c.sf_weight_lr_power = 16.0;
  EXPECT_NO_THROW(c.validate());
  for (double p : {16.5, 1e9, -1.0}) {
    c.sf_weight_lr_power = p;
    expect_rejected(c, "optim.sf_weight_lr_power");
  }
  // Inside the range, an LR whose weight underflows: lr^16 = 1e-320 is no normal double.
  c = ok;
  c.sf_weight_lr_power = 16.0;
  c.lr = 1e-20;
  expect_rejected(c, "optim.sf_weight_lr_power");
  c.lr = 1e-19;  // 1e-304: still normal
  EXPECT_NO_THROW(c.validate());
}

// AdEMAMix's warmup takes log(beta + 1e-8) of beta1 and beta3: a beta in [1 - 1e-8, 1) gave a
// negative half-life and a warmup beta3 above 1.
TEST(OptimConfigValidate, AdemamixBetasStayBelowOneMinus1e8) {
  OptimConfig ok;
  ok.name = "ademamix";
  EXPECT_NO_THROW(ok.validate());
  OptimConfig c = ok;
  c.ademamix_beta3 = 0.9999999;
  EXPECT_NO_THROW(c.validate());
  c.ademamix_beta3 = 0.999999995;
  expect_rejected(c, "optim.ademamix_beta3");
  c = ok;
  c.beta1 = 0.999999995;
  expect_rejected(c, "optim.beta1");
  c.name = "adamw";  // only ademamix takes that logarithm
  EXPECT_NO_THROW(c.validate());
}

// The one group rule: matrices decay, embeddings decay unless optim.decay_embeddings = false,
// biases and norm weights never; LR multipliers per group.
TEST(OptimGroups, RuleByKindAndConfig) {
  ModelConfig m = testing::model_config_of({.vocab = 100, .L = 1, .H = 2, .C = 16, .block = 8});
  const ParamTable t = param_table_build(m, ParamTableOptions{});
  OptimConfig c;
  c.weight_decay = 0.1;
  c.lr_mult_embedding = 2.0;
  c.lr_mult_nodecay = 0.5;
  auto group = [&](const char* name) {
    return optim_groups(c)[static_cast<size_t>(optim_group_of(t.find(name), c))];
  };
  EXPECT_EQ(group("block.0.attn.qkv.weight").weight_decay, 0.1);
  EXPECT_EQ(group("block.0.attn.qkv.weight").lr_mult, 1.0);
  EXPECT_EQ(group("block.0.attn.qkv.bias").weight_decay, 0.0);
  EXPECT_EQ(group("block.0.ln1.weight").weight_decay, 0.0);
  EXPECT_EQ(group("block.0.ln1.weight").lr_mult, 0.5);
  EXPECT_EQ(group("embed.wte").weight_decay, 0.1);
  EXPECT_EQ(group("embed.wpe").lr_mult, 2.0);
  c.decay_embeddings = false;
  EXPECT_EQ(group("embed.wte").weight_decay, 0.0);
  EXPECT_EQ(group("block.0.mlp.fc.weight").weight_decay, 0.1);
}

TEST(OptimFactory, CreatesEveryNamedOptimizer) {
  for (const char* n : {"sgd", "adamw", "lamb", "lars", "adafactor", "adamw8bit"}) {
    OptimConfig c;
    c.name = n;
    EXPECT_EQ(optimizer_create(c)->name(), n);
  }
  OptimConfig c;
  c.name = "rmsprop";
  EXPECT_THROW(optimizer_create(c), Error);
}

}  // namespace
}  // namespace ledgerlm
