// Known-answer tests: two steps of each optimizer on a 2x3 matrix, float64 answers computed
// independently (written out from the papers' / torch's formulas). The double instantiation of
// the kernels must match to 1e-9; the production fp32 optimizers (through optimizer_create and
// a one-tensor parameter table) must match to fp32 accuracy.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "model/backend/optim/optim_kernels.h"
#include "model/backend/optim/optim_kernels_trust.h"
#include "optim/optimizer.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using testing::compare_tensor;

constexpr std::array<double, 6> kW0 = {0.5, -1, 2, 0, 0.25, -0.75};
constexpr std::array<double, 6> kG1 = {0.1, -0.2, 0.3, 0.05, 0, -0.4};
constexpr std::array<double, 6> kG2 = {-0.05, 0.1, 0.2, 0.3, -0.1, 0.1};

const std::vector<double> kAdamW = {0.486347131, -0.98534763, 1.976308479,
                                    -0.01843125, 0.256941617, -0.733816069};
const std::vector<double> kSgd = {0.480132905, -0.96026581, 1.87159552,
                                  -0.07053195, 0.267848402, -0.657289607};
const std::vector<double> kLamb = {0.485241136,  -0.984063006, 1.972130022,
                                   -0.021440488, 0.259533496,  -0.731888768};
const std::vector<double> kLars = {0.4999413129,     -0.9998826258, 1.999618597,
                                   -0.0002102383258, 0.2500532903,  -0.7497256524};
const std::vector<double> kAdafactor = {0.49042783,   -0.994873629, 1.98303245,
                                        -0.021707882, 0.25753235,   -0.742861196};

// The answers are given to ~9-10 significant digits; double arithmetic itself is far closer.
constexpr double kDoubleTol = 1e-9;

GradView<double, double> grad_of(const std::array<double, 6>& g) {
  return {g.data(), 1.0};
}

void expect_close(const std::string& name, const std::vector<double>& got,
                  const std::vector<double>& ref, double atol) {
  auto r = compare_tensor(name, got.data(), ref.data(), 6, atol, 0.0);
  EXPECT_TRUE(r.ok) << r.message;
}

TEST(OptimKnown, AdamWDouble) {
  std::vector<double> w(kW0.begin(), kW0.end()), m(6), v(6);
  for (int t = 1; t <= 2; ++t) {
    auto s = adamw_step_make<double>(0.01, 0.9, 0.999, 1e-8, 0.1, t);
    adamw_update(w.data(), m.data(), v.data(), grad_of(t == 1 ? kG1 : kG2), 6, s);
  }
  expect_close("adamw", w, kAdamW, kDoubleTol);
}

TEST(OptimKnown, SgdNesterovL2Double) {
  std::vector<double> w(kW0.begin(), kW0.end()), buf(6);
  SgdStep<double> s;
  s.lr = 0.1;
  s.momentum = 0.9;
  s.nesterov = true;
  s.l2 = 0.01;
  for (int t = 1; t <= 2; ++t) sgd_update(w.data(), buf.data(), grad_of(t == 1 ? kG1 : kG2), 6, s);
  expect_close("sgd", w, kSgd, kDoubleTol);
}

TEST(OptimKnown, LambDouble) {
  std::vector<double> w(kW0.begin(), kW0.end()), m(6), v(6);
  for (int t = 1; t <= 2; ++t) {
    auto s = lamb_step_make<double>(0.9, 0.999, 1e-6, 0.1, t);
    lamb_update(w.data(), m.data(), v.data(), grad_of(t == 1 ? kG1 : kG2), 6, s, 0.01, false, 0, 0);
  }
  expect_close("lamb", w, kLamb, kDoubleTol);
}

TEST(OptimKnown, LarsDouble) {
  std::vector<double> w(kW0.begin(), kW0.end()), buf(6);
  for (int t = 1; t <= 2; ++t)
    lars_update(w.data(), buf.data(), grad_of(t == 1 ? kG1 : kG2), 6, 0.1, 0.9, 0.01, 1e-3, true);
  expect_close("lars", w, kLars, kDoubleTol);
}

TEST(OptimKnown, AdafactorDouble) {
  std::vector<double> w(kW0.begin(), kW0.end()), row(2), col(3);
  for (int t = 1; t <= 2; ++t) {
    AdafactorStep<double> s;
    s.beta2 = adafactor_beta2(t, 0.8);
    s.one_minus_beta2 = 1.0 - s.beta2;
    s.eps1 = 1e-30;
    adafactor_update_matrix(w.data(), row.data(), col.data(), static_cast<double*>(nullptr),
                            grad_of(t == 1 ? kG1 : kG2), 2, 3, s, adafactor_relative_rho(t), 1e-3,
                            1.0);
  }
  expect_close("adafactor", w, kAdafactor, kDoubleTol);
}

// The production path: fp32 master and grads through the Optimizer interface.
std::vector<double> run_fp32(const OptimConfig& config, double lr) {
  ParamTable table = testing::make_table({{"w", {2, 3}, ParamKind::kMatrix}});
  testing::TestBackend backend;
  auto opt = optimizer_create(config);
  opt->init(table, 0, table.total, backend);
  std::vector<float> w(static_cast<size_t>(table.total), 0.0f), g(w.size(), 0.0f);
  for (int i = 0; i < 6; ++i) w[i] = static_cast<float>(kW0[i]);
  for (int t = 1; t <= 2; ++t) {
    for (int i = 0; i < 6; ++i) g[i] = static_cast<float>((t == 1 ? kG1 : kG2)[i]);
    OptimStepInfo info;
    info.lr = lr;
    info.step = t;
    opt->step(w.data(), Tensor(g.data(), DType::kF32), info);
  }
  for (size_t i = 6; i < w.size(); ++i) EXPECT_EQ(w[i], 0.0f) << "padding element " << i;
  return std::vector<double>(w.begin(), w.begin() + 6);
}

// fp32 rounding of inputs, constants and ~10 operations per element: a few ulps of values <= 2.
constexpr double kFloatTol = 2e-6;

TEST(OptimKnown, Fp32OptimizersMatch) {
  OptimConfig c;
  c.name = "adamw";
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-8;
  c.weight_decay = 0.1;
  expect_close("adamw fp32", run_fp32(c, 0.01), kAdamW, kFloatTol);

  c = OptimConfig{};
  c.name = "sgd";
  c.momentum = 0.9;
  c.nesterov = true;
  c.wd_mode = "l2";
  c.weight_decay = 0.01;
  for (const char* impl : {"loop", "foreach", "fused"}) {
    c.impl = impl;
    expect_close(std::string("sgd fp32 ") + impl, run_fp32(c, 0.1), kSgd, kFloatTol);
  }

  c = OptimConfig{};
  c.name = "lamb";
  c.beta1 = 0.9;
  c.beta2 = 0.999;
  c.eps = 1e-6;
  c.weight_decay = 0.1;
  expect_close("lamb fp32", run_fp32(c, 0.01), kLamb, kFloatTol);

  c = OptimConfig{};
  c.name = "lars";
  c.momentum = 0.9;
  c.weight_decay = 0.01;
  c.lars_eta = 1e-3;
  expect_close("lars fp32", run_fp32(c, 0.1), kLars, kFloatTol);

  c = OptimConfig{};
  c.name = "adafactor";
  c.weight_decay = 0.0;
  expect_close("adafactor fp32", run_fp32(c, 0.0), kAdafactor, kFloatTol);
}

}  // namespace
}  // namespace ledgerlm
