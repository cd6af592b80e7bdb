// Properties of the optimizer implementations that hold by construction and are checked exactly:
// loop / foreach / fused give bit-identical results and state; a range split over two ranks
// (threads with a real all-reduce) matches the whole range; padding is never read or written;
// bf16/fp16 gradients equal their fp32 widening; state components and views are honest.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <thread>
#include <vector>

#include "optim/optimizer.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using testing::TensorSpec;

// Embedding first, then a large matrix the two-rank split cuts mid-row, a vector, a small matrix.
// A 256 x 160 matrix (40960 elements) exercises the OpenMP-parallel path of the fused kernels.
ParamTable test_table(int64_t world = 2) {
  return testing::make_table({{"emb", {64, 80}, ParamKind::kEmbedding},
                              {"big", {48, 100}, ParamKind::kMatrix},
                              {"vec", {300}, ParamKind::kBias},
                              {"small", {20, 30}, ParamKind::kMatrix},
                              {"norm", {80}, ParamKind::kNormWeight},
                              {"huge", {256, 160}, ParamKind::kMatrix}},
                             256, world);
}

struct RunResult {
  std::vector<float> master;
  std::vector<std::vector<char>> state;  // bytes of every state view, in order
  int reduce_calls = 0;
};

OptimConfig config_for(const std::string& name) {
  OptimConfig c;
  c.name = name;
  c.lr = 0.01;
  c.weight_decay = 0.1;
  c.lr_mult_embedding = 0.5;
  c.lr_mult_nodecay = 2.0;
  c.adafactor_beta1 = name == "adafactor" ? 0.9 : 0.0;
  return c;
}

// Runs `steps` steps on [begin, end) with gradients in `gdtype`. Padding of master is 7 and of
// the gradients NaN: neither may leak into results.
RunResult run_range(const OptimConfig& c, const ParamTable& table, int64_t begin, int64_t end,
                    DType gdtype, int steps,
                    const std::function<void(double*, int)>& reduce = nullptr) {
  testing::TestBackend backend;
  auto opt = optimizer_create(c);
  opt->init(table, begin, end, backend);
  RunResult run;
  std::vector<float> master = testing::random_flat(table, 11, 0.3, 7.0f);
  run.master.assign(master.begin() + begin, master.begin() + end);
  for (int s = 1; s <= steps; ++s) {
    std::vector<float> g = testing::random_flat(table, 50 + s, 0.05, NAN);
    std::vector<uint16_t> g16(g.size());
    for (size_t i = 0; i < g.size(); ++i)
      g16[i] = gdtype == DType::kBF16 ? f32_to_bf16(g[i]) : f32_to_f16(g[i]);
    OptimStepInfo info;
    info.lr = c.lr * (1.0 - 0.1 * s);
    info.step = s;
    info.grad_scale = 0.75;
    info.reduce = [&](double* v, int n) {
      ++run.reduce_calls;
      if (reduce) reduce(v, n);
    };
    Tensor grads = gdtype == DType::kF32 ? Tensor(g.data() + begin, DType::kF32)
                                         : Tensor(g16.data() + begin, gdtype);
    opt->step(run.master.data(), grads, info);
  }
  for (const auto& v : opt->state_views()) {
    const char* p = static_cast<const char*>(v.data);
    run.state.emplace_back(p, p + v.numel * static_cast<int64_t>(dtype_size(v.dtype)));
  }
  return run;
}

bool bit_equal(const RunResult& a, const RunResult& b) {
  return a.master.size() == b.master.size() &&
         std::memcmp(a.master.data(), b.master.data(), a.master.size() * 4) == 0 &&
         a.state == b.state;
}

TEST(OptimImpl, LoopForeachFusedAreBitIdentical) {
  const ParamTable table = test_table(1);
  struct Variant {
    std::string name, wd_mode;
    double momentum;
    bool nesterov;
  };
  const std::vector<Variant> variants = {{"sgd", "l2", 0.9, true},
                                         {"sgd", "decoupled", 0.9, false},
                                         {"sgd", "decoupled", 0.0, false},
                                         {"adamw", "decoupled", 0.0, false}};
  for (const auto& v : variants) {
    for (DType gd : {DType::kF32, DType::kBF16}) {
      OptimConfig c = config_for(v.name);
      c.wd_mode = v.wd_mode;
      c.momentum = v.momentum;
      c.nesterov = v.nesterov;
      c.impl = "fused";
      const RunResult fused = run_range(c, table, 0, table.total, gd, 4);
      for (const char* impl : {"loop", "foreach"}) {
        c.impl = impl;
        const RunResult other = run_range(c, table, 0, table.total, gd, 4);
        EXPECT_TRUE(bit_equal(fused, other))
            << v.name << " " << v.wd_mode << " momentum " << v.momentum << " " << impl
            << " vs fused, grads " << dtype_name(gd);
      }
      // And the step really moved the weights (so equality is not vacuous).
      const std::vector<float> init = testing::random_flat(table, 11, 0.3, 7.0f);
      EXPECT_NE(std::memcmp(init.data(), fused.master.data(), init.size() * 4), 0);
    }
  }
}

const std::vector<std::string> kAll = {"sgd", "adamw", "lamb", "lars", "adafactor", "adamw8bit"};

// Two ranks as two threads; reduce = all-reduce through shared slots, summed in rank order.
TEST(OptimImpl, TwoRankShardsMatchWholeRange) {
  const ParamTable table = test_table(2);
  const int64_t half = table.total / 2;
  ASSERT_EQ(half % 256, 0);
  for (const auto& name : kAll) {
    SCOPED_TRACE(name);
    const OptimConfig c = config_for(name);
    const RunResult whole = run_range(c, table, 0, table.total, DType::kF32, 3);
    std::vector<double> slots[2];
    std::barrier sync(2);
    auto reduce_for = [&](int rank) {
      return [&, rank](double* v, int n) {
        slots[rank].assign(v, v + n);
        sync.arrive_and_wait();
        for (int i = 0; i < n; ++i) v[i] = slots[0][i] + slots[1][i];
        sync.arrive_and_wait();
      };
    };
    RunResult shard[2];
    std::thread t0([&] { shard[0] = run_range(c, table, 0, half, DType::kF32, 3, reduce_for(0)); });
    std::thread t1(
        [&] { shard[1] = run_range(c, table, half, table.total, DType::kF32, 3, reduce_for(1)); });
    t0.join();
    t1.join();
    std::vector<float> joined = shard[0].master;
    joined.insert(joined.end(), shard[1].master.begin(), shard[1].master.end());
    // Only the order of partial sums differs (norms, Adafactor statistics): relative changes of
    // ~1e-16 in double, at most an ulp or so of fp32 after 3 steps on weights ~1.
    auto r =
        testing::compare_tensor(name, joined.data(), whole.master.data(), table.total, 1e-6, 0.0);
    EXPECT_TRUE(r.ok) << r.message;
    const int expected_calls = name == "adafactor" ? 2 : (name == "lamb" || name == "lars") ? 1 : 0;
    EXPECT_EQ(shard[0].reduce_calls, 3 * expected_calls) << "one batched reduce per phase";
  }
}

TEST(OptimImpl, PaddingUntouchedAndNoNaNLeaks) {
  const ParamTable table = test_table(1);
  for (const auto& name : kAll) {
    SCOPED_TRACE(name);
    const RunResult run = run_range(config_for(name), table, 0, table.total, DType::kF32, 2);
    std::vector<bool> real(static_cast<size_t>(table.total), false);
    for (const auto& p : table.params)
      for (int64_t i = 0; i < p.numel; ++i) real[p.offset + i] = true;
    for (int64_t i = 0; i < table.total; ++i) {
      if (real[i]) {
        ASSERT_TRUE(std::isfinite(run.master[i])) << "element " << i;
      } else {
        ASSERT_EQ(run.master[i], 7.0f) << "padding element " << i;
      }
    }
  }
}

TEST(OptimImpl, LowPrecisionGradsEqualTheirWidening) {
  const ParamTable table = test_table(1);
  for (const auto& name : kAll) {
    for (DType gd : {DType::kBF16, DType::kF16}) {
      SCOPED_TRACE(name + " " + dtype_name(gd));
      // Reference: fp32 grads holding the rounded values.
      OptimConfig c = config_for(name);
      testing::TestBackend backend;
      auto opt = optimizer_create(c);
      opt->init(table, 0, table.total, backend);
      std::vector<float> master = testing::random_flat(table, 11, 0.3, 7.0f);
      for (int s = 1; s <= 2; ++s) {
        std::vector<float> g = testing::random_flat(table, 50 + s, 0.05, NAN);
        for (float& x : g)
          x = gd == DType::kBF16 ? bf16_to_f32(f32_to_bf16(x)) : f16_to_f32(f32_to_f16(x));
        OptimStepInfo info;
        info.lr = c.lr * (1.0 - 0.1 * s);
        info.step = s;
        info.grad_scale = 0.75;
        opt->step(master.data(), Tensor(g.data(), DType::kF32), info);
      }
      const RunResult low = run_range(c, table, 0, table.total, gd, 2);
      EXPECT_EQ(std::memcmp(master.data(), low.master.data(), master.size() * 4), 0);
    }
  }
}

TEST(OptimImpl, StateComponentsAreHonest) {
  const ParamTable table = test_table(1);
  for (const auto& name : kAll) {
    SCOPED_TRACE(name);
    testing::TestBackend backend;
    auto opt = optimizer_create(config_for(name));
    opt->init(table, 0, table.total, backend);
    int64_t listed = 0;
    for (const auto& comp : opt->state_components()) {
      EXPECT_EQ(comp.bytes, comp.elements * static_cast<int64_t>(dtype_size(comp.dtype)));
      listed += comp.bytes;
    }
    EXPECT_EQ(listed, backend.tracker().total().current);
    // Every parameter element held here has its state in the views, once per state name.
    std::map<std::string, int64_t> covered;
    for (const auto& v : opt->state_views()) {
      ASSERT_GE(v.param, 0);
      if (v.name != "row" && v.name != "col" && v.name.rfind("absmax", 0) != 0)
        covered[v.name] += v.numel;
    }
    for (const auto& [state, n] : covered) {
      if (name == "adafactor" && state == "v") continue;  // vectors only
      if (name == "adamw8bit") continue;                  // split between codes and fp32
      EXPECT_EQ(n, table.num_params) << state;
    }
  }
  auto bytes = [](const std::string& n, double momentum) {
    OptimConfig c = config_for(n);
    c.momentum = momentum;
    return optimizer_create(c)->state_bytes_per_param();
  };
  EXPECT_EQ(bytes("sgd", 0.9), 4.0);
  EXPECT_EQ(bytes("sgd", 0.0), 0.0);
  EXPECT_EQ(bytes("adamw", 0.9), 8.0);
  EXPECT_EQ(bytes("lamb", 0.9), 8.0);
  EXPECT_EQ(bytes("lars", 0.9), 4.0);
  EXPECT_LT(bytes("adafactor", 0.9), 4.1);  // beta1 momentum + tiny factored statistics
}

}  // namespace
}  // namespace ledgerlm
