// Optimizer state stored in bf16 (precision.state = bf16, OptimConfig::state_dtype): the
// parameter-shaped states (m, v, momentum, Adafactor's m and vector V) really take 2 bytes per
// element in the tracker, the components and the views; stored values are the round-to-nearest-
// even of the fp32 update; loop / foreach / fused stay bit-identical; 8-bit AdamW and Adafactor's
// factored statistics are unaffected; and bf16-state AdamW tracks fp32-state AdamW on a
// least-squares problem.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "model/backend/optim/optim_kernels.h"
#include "optim/optim_groups.h"
#include "optim/optimizer.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using testing::TensorSpec;

ParamTable test_table() {
  return testing::make_table({{"emb", {64, 80}, ParamKind::kEmbedding},
                              {"vec", {300}, ParamKind::kBias},
                              {"small", {20, 30}, ParamKind::kMatrix},
                              {"huge", {256, 160}, ParamKind::kMatrix}},
                             256, 1);
}

OptimConfig config_for(const std::string& name, DType state) {
  OptimConfig c;
  c.name = name;
  c.lr = 0.01;
  c.weight_decay = 0.1;
  c.adafactor_beta1 = name == "adafactor" ? 0.9 : 0.0;
  c.state_dtype = state;
  return c;
}

struct StateRun {
  std::vector<float> master;
  std::vector<std::vector<char>> state;  // bytes of every state view
  std::vector<DType> dtypes;             // dtype of every state view
};

StateRun run_steps(const OptimConfig& c, const ParamTable& table, DType gdtype, int steps) {
  testing::TestBackend backend;
  auto opt = optimizer_create(c);
  opt->init(table, 0, table.total, backend);
  StateRun run;
  run.master = testing::random_flat(table, 11, 0.3, 7.0f);
  for (int s = 1; s <= steps; ++s) {
    std::vector<float> g = testing::random_flat(table, 50 + s, 0.05, NAN);
    std::vector<uint16_t> g16(g.size());
    for (size_t i = 0; i < g.size(); ++i) g16[i] = f32_to_bf16(g[i]);
    OptimStepInfo info;
    info.lr = c.lr * (1.0 - 0.1 * s);
    info.step = s;
    info.grad_scale = 0.75;
    Tensor grads =
        gdtype == DType::kF32 ? Tensor(g.data(), DType::kF32) : Tensor(g16.data(), DType::kBF16);
    opt->step(run.master.data(), grads, info);
  }
  for (const auto& v : opt->state_views()) {
    const char* p = static_cast<const char*>(v.data);
    run.state.emplace_back(p, p + v.numel * static_cast<int64_t>(dtype_size(v.dtype)));
    run.dtypes.push_back(v.dtype);
  }
  return run;
}

TEST(OptimStateBf16, LoopForeachFusedAreBitIdentical) {
  // The fused kernels use exactly the value they stored (rounded to bf16), which is what the
  // staged schedules read back: equality is by construction, so the tolerance is zero.
  const ParamTable table = test_table();
  for (const char* name : {"sgd", "adamw"}) {
    for (bool nesterov : {false, true}) {
      if (nesterov && std::string(name) != "sgd") continue;
      for (DType gd : {DType::kF32, DType::kBF16}) {
        OptimConfig c = config_for(name, DType::kBF16);
        c.nesterov = nesterov;
        c.impl = "fused";
        const StateRun fused = run_steps(c, table, gd, 4);
        ASSERT_FALSE(fused.state.empty());
        for (DType d : fused.dtypes) EXPECT_EQ(d, DType::kBF16);
        for (const char* impl : {"loop", "foreach"}) {
          c.impl = impl;
          const StateRun other = run_steps(c, table, gd, 4);
          EXPECT_EQ(std::memcmp(fused.master.data(), other.master.data(), fused.master.size() * 4),
                    0)
              << name << " " << impl << " nesterov " << nesterov << " grads " << dtype_name(gd);
          EXPECT_TRUE(fused.state == other.state) << name << " " << impl << " state";
        }
        // bf16 state really changes the trajectory (so the fp32 path is not silently taken).
        const StateRun f32 = run_steps(config_for(name, DType::kF32), table, gd, 4);
        EXPECT_NE(std::memcmp(fused.master.data(), f32.master.data(), fused.master.size() * 4), 0);
      }
    }
  }
}

// Which tags hold parameter-shaped state, and how many elements each holds, per optimizer.
TEST(OptimStateBf16, StateIsStoredAsBf16) {
  const ParamTable table = test_table();
  int64_t vec_elems = 0;
  for (const auto& p : table.params)
    if (p.shape.size() == 1) vec_elems += p.numel;
  for (const char* name : {"sgd", "adamw", "lamb", "lars", "adafactor", "adamw8bit"}) {
    SCOPED_TRACE(name);
    testing::TestBackend b32, b16;
    auto o32 = optimizer_create(config_for(name, DType::kF32));
    auto o16 = optimizer_create(config_for(name, DType::kBF16));
    o32->init(table, 0, table.total, b32);
    o16->init(table, 0, table.total, b16);
    const std::string n = name;
    const bool mirrors = n != "adamw8bit";  // 8-bit AdamW keeps its codes/absmax/fp32 fallback
    const int64_t E = table.total;
    // Expected elements per tag for the parameter-shaped states.
    std::vector<std::pair<MemTag, int64_t>> shaped;
    if (n == "adamw" || n == "lamb") shaped = {{MemTag::kOptimM, E}, {MemTag::kOptimV, E}};
    if (n == "sgd" || n == "lars") shaped = {{MemTag::kOptimMomentum, E}};
    if (n == "adafactor") shaped = {{MemTag::kOptimM, E}, {MemTag::kOptimV, vec_elems}};
    for (const auto& [tag, elems] : shaped) {
      EXPECT_EQ(b16.tracker().usage(tag).peak, 2 * elems) << mem_tag_name(tag);
      EXPECT_EQ(b32.tracker().usage(tag).peak, 4 * elems) << mem_tag_name(tag);
    }
    // Everything else (factored statistics, codes, absmax) is unchanged.
    for (MemTag tag : {MemTag::kOptimFactored, MemTag::kOptimCodes, MemTag::kOptimAbsmax})
      EXPECT_EQ(b16.tracker().usage(tag).peak, b32.tracker().usage(tag).peak) << mem_tag_name(tag);
    if (!mirrors) {
      EXPECT_EQ(b16.tracker().total().peak, b32.tracker().total().peak);
      EXPECT_EQ(o16->state_bytes_per_param(), o32->state_bytes_per_param());
    }
    // Components: honest dtype and bytes, summing to what the tracker saw.
    int64_t listed = 0;
    for (const auto& comp : o16->state_components()) {
      EXPECT_EQ(comp.bytes, comp.elements * static_cast<int64_t>(dtype_size(comp.dtype)));
      const bool shaped_comp = mirrors && comp.name != "row" && comp.name != "col";
      if (mirrors) {
        EXPECT_EQ(comp.dtype, shaped_comp ? DType::kBF16 : DType::kF32) << comp.name;
      }
      listed += comp.bytes;
    }
    EXPECT_EQ(listed, b16.tracker().total().current);
    // Views (what checkpoints save) report the storage dtype.
    for (const auto& v : o16->state_views()) {
      if (!mirrors) continue;
      EXPECT_EQ(v.dtype, (v.name == "row" || v.name == "col") ? DType::kF32 : DType::kBF16)
          << v.name;
    }
  }
  // state_bytes_per_param: half of the fp32 figure for the mirroring optimizers.
  auto bpp = [](const char* n, DType d) {
    return optimizer_create(config_for(n, d))->state_bytes_per_param();
  };
  EXPECT_EQ(bpp("adamw", DType::kBF16), 4.0);
  EXPECT_EQ(bpp("lamb", DType::kBF16), 4.0);
  EXPECT_EQ(bpp("sgd", DType::kBF16), 2.0);
  EXPECT_EQ(bpp("lars", DType::kBF16), 2.0);
  EXPECT_LT(bpp("adafactor", DType::kBF16), 2.1);
  EXPECT_EQ(bpp("adamw8bit", DType::kBF16), bpp("adamw8bit", DType::kF32));
}

TEST(OptimStateBf16, StoredValuesAreRoundedFp32UpdatesAndTheStepUsesThem) {
  // One AdamW step from zero state, computed here element by element: m = (1-b1) g and
  // v = (1-b2) g^2 in fp32, rounded to nearest even on store; the weight update uses the stored
  // (rounded) moments. Exact comparison: the arithmetic is the same by definition.
  const ParamTable table = test_table();
  OptimConfig c = config_for("adamw", DType::kBF16);
  testing::TestBackend backend;
  auto opt = optimizer_create(c);
  opt->init(table, 0, table.total, backend);
  std::vector<float> master = testing::random_flat(table, 3, 0.3);
  const std::vector<float> w0 = master;
  const std::vector<float> g = testing::random_flat(table, 4, 0.05);
  OptimStepInfo info;
  info.lr = c.lr;
  info.step = 1;
  opt->step(master.data(), Tensor(const_cast<float*>(g.data()), DType::kF32), info);
  int checked = 0;
  for (const auto& v : opt->state_views()) {
    ASSERT_EQ(v.dtype, DType::kBF16);
    const ParamInfo& p = table.params[static_cast<size_t>(v.param)];
    const double wd = optim_groups(c)[static_cast<size_t>(optim_group_of(p, c))].weight_decay;
    const auto s = adamw_step_make<float>(c.lr, c.beta1, c.beta2, c.eps, wd, 1);
    const auto* bits = static_cast<const uint16_t*>(v.data);
    for (int64_t i = 0; i < v.numel; ++i) {
      const float gi = g[static_cast<size_t>(p.offset + i)];
      const float want = v.name == "m" ? adamw_elem_m(0.0f, gi, s) : adamw_elem_v(0.0f, gi, s);
      ASSERT_EQ(bits[i], f32_to_bf16(want)) << p.name << "." << v.name << "[" << i << "]";
      ++checked;
    }
    if (v.name != "v") continue;
    for (int64_t i = 0; i < v.numel; ++i) {
      const size_t k = static_cast<size_t>(p.offset + i);
      const float m = bf16_to_f32(f32_to_bf16(adamw_elem_m(0.0f, g[k], s)));
      const float vv = bf16_to_f32(f32_to_bf16(adamw_elem_v(0.0f, g[k], s)));
      ASSERT_EQ(master[k], adamw_elem_param(w0[k] * s.decay, m, vv, s))
          << p.name << "[" << i << "]";
    }
  }
  EXPECT_EQ(checked, 2 * table.num_params);
}

// min 0.5 ||A x - b||^2 over x (one 16 x 8 "matrix" parameter), A 256 x 128 Gaussian, b = A x*.
struct LeastSquares {
  int64_t rows = 256, n = 128;
  std::vector<double> A, b;
  LeastSquares() {
    std::mt19937_64 gen(5);
    std::normal_distribution<double> d(0.0, 1.0);
    A.resize(static_cast<size_t>(rows * n));
    for (double& a : A) a = d(gen) / std::sqrt(static_cast<double>(rows));
    std::vector<double> x(static_cast<size_t>(n));
    for (double& v : x) v = d(gen);
    b.assign(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < n; ++j) b[r] += A[r * n + j] * x[j];
  }
  // Loss, and the gradient into g (fp32, padded to the table).
  double loss_grad(const float* x, float* g) const {
    std::vector<double> res(static_cast<size_t>(rows));
    double loss = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      double acc = -b[r];
      for (int64_t j = 0; j < n; ++j) acc += A[r * n + j] * x[j];
      res[r] = acc;
      loss += 0.5 * acc * acc;
    }
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t r = 0; r < rows; ++r) acc += A[r * n + j] * res[r];
      g[j] = static_cast<float>(acc);
    }
    return loss;
  }
};

std::vector<double> least_squares_run(DType state, std::vector<float>* x_out) {
  const ParamTable table = testing::make_table({{"x", {16, 8}, ParamKind::kMatrix}}, 256, 1);
  OptimConfig c = config_for("adamw", state);
  c.lr = 1e-2;
  c.weight_decay = 0.0;
  testing::TestBackend backend;
  auto opt = optimizer_create(c);
  opt->init(table, 0, table.total, backend);
  const LeastSquares ls;
  std::vector<float> x(static_cast<size_t>(table.total), 0.0f), g(x.size(), 0.0f);
  std::vector<double> losses;
  for (int s = 1; s <= 400; ++s) {
    losses.push_back(ls.loss_grad(x.data(), g.data()));
    OptimStepInfo info;
    info.lr = c.lr;
    info.step = s;
    opt->step(x.data(), Tensor(g.data(), DType::kF32), info);
  }
  losses.push_back(ls.loss_grad(x.data(), g.data()));
  *x_out = x;
  return losses;
}

TEST(OptimStateBf16, AdamWTracksFp32StateOnLeastSquares) {
  // bf16 keeps 8 significant bits: each store perturbs m and v by at most 2^-9 relative, so the
  // update m/sqrt(v) is off by ~1.5 * 2^-9 ~ 3e-3 relative per step (not compounding in m, v:
  // every step re-derives them from the stored value with a fresh rounding). The weights then
  // differ by about lr * 3e-3 per step, partly cancelling; on this well-conditioned problem the
  // difference does not grow without bound because both runs contract towards the same x*.
  // Measured over 400 steps at lr 1e-2 from x = 0 (|x*| up to ~3.2): max |x_bf16 - x_fp32| =
  // 1.5e-3, final losses 2.3e-5 (fp32) and 2.6e-5 (bf16) from 66. Bounds: 1e-2 absolute on x
  // (~lr, one step's worth; 6x the measurement), loss gaps within 1e-3 of the initial loss
  // (measured 3e-4), and both runs reduce the loss by 1e4x (a bf16 path that stalls or diverges
  // fails that).
  std::vector<float> x32, x16;
  const std::vector<double> l32 = least_squares_run(DType::kF32, &x32);
  const std::vector<double> l16 = least_squares_run(DType::kBF16, &x16);
  auto r = testing::compare_tensor("x", x16.data(), x32.data(), 128, 1e-2, 0.0);
  EXPECT_TRUE(r.ok) << r.message;
  double max_gap = 0.0;
  for (size_t s = 0; s < l32.size(); ++s) max_gap = std::max(max_gap, std::fabs(l16[s] - l32[s]));
  std::printf("least squares: loss %.4g -> fp32 %.4g, bf16 %.4g; max loss gap %.3g; %s\n",
              l32.front(), l32.back(), l16.back(), max_gap, r.message.c_str());
  EXPECT_LE(max_gap, 1e-3 * l32.front());
  EXPECT_LT(l32.back(), l32.front() * 1e-4);
  EXPECT_LT(l16.back(), l16.front() * 1e-4);
  // And bf16 state is not bit-identical to fp32 state (the storage really is different).
  EXPECT_NE(std::memcmp(x16.data(), x32.data(), x16.size() * 4), 0);
}

TEST(OptimStateBf16, RejectsOtherStateDtypes) {
  OptimConfig c = config_for("adamw", DType::kF16);
  EXPECT_THROW(optimizer_create(c), Error);
  try {
    c.validate();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision.state"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ledgerlm
