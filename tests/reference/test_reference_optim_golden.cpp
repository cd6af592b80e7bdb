// The 2026 optimizers against golden tensors from their authors' own code
// (tests/reference/golden/*.safetensors, written once by tests/reference/gen_optim_golden.py:
// lion-pytorch's Lion, schedulefree's AdamWScheduleFree, Apple's AdEMAMix, torch.optim.Muon with
// torch.optim.AdamW for the hybrid's other group). Four tensors — a (6, 10) and b (12, 5) weights
// (wide and tall), e (10, 4) an embedding, c (7,) a bias (never decayed) — take 6 steps of the
// fixture's gradients; weights and every state tensor are compared per tensor with
// max|a - b| <= atol + rtol * max|ref|, the worst element printed.
//
// Tolerances. The element-wise optimizers do ~10 fp32 operations per element per step in an
// order close to (not identical with) the authors' (e.g. torch's lerp for moments, Schedule-Free
// written in x instead of y): 6 steps of that stay within ~100 ulp, so rtol 1e-5 (~80 ulp of
// the largest element) with atol 1e-7 for elements near zero. Muon's Newton–Schulz can multiply
// rounding differences from GEMM summation order by up to ~|a| + |b| + |c| ~ 10 per iteration:
// rtol 2e-5 of the update (final - init, so that the bound is relative to what the optimizer
// changed, not to the weights); the measured gap is ~1e-6 of it.
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/safetensors.h"
#include "model/backend/backend.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "tests/support/optim_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

const char* const kNames[] = {"a", "b", "e", "c"};
constexpr int kSteps = 6;

ParamTable golden_table() {
  return testing::make_table({{"a", {6, 10}, ParamKind::kMatrix},
                              {"b", {12, 5}, ParamKind::kMatrix},
                              {"e", {10, 4}, ParamKind::kEmbedding},
                              {"c", {7}, ParamKind::kBias}},
                             64);
}

std::string fixture(const std::string& name) {
  return testing::source_dir() + "/tests/reference/golden/" + name + ".safetensors";
}

double meta(const SafeTensorsFile& f, const std::string& key) {
  const auto it = f.metadata().find(key);
  EXPECT_NE(it, f.metadata().end()) << f.path() << ": no metadata " << key;
  return it == f.metadata().end() ? 0.0 : std::stod(it->second);
}

// The fixture's training run through our optimizer: weights (the master) and, for optimizers
// that write one, the compute copy after kSteps steps.
struct Outcome {
  ParamTable table;
  std::vector<float> master, compute;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<Backend> backend;
};

Outcome run_case(const SafeTensorsFile& f, const OptimConfig& config) {
  Outcome o;
  o.table = golden_table();
  o.backend = backend_create_cpu(1);
  o.opt = optimizer_create(config);
  o.opt->init(o.table, 0, o.table.total, *o.backend);
  o.master.assign(static_cast<size_t>(o.table.total), 0.0f);
  o.compute.assign(static_cast<size_t>(o.table.total), 0.0f);
  for (const ParamInfo& p : o.table.params) {
    const std::vector<float> w = f.read_f32("init." + p.name);
    std::copy(w.begin(), w.end(), o.master.begin() + p.offset);
  }
  o.compute = o.master;
  std::vector<float> grads(static_cast<size_t>(o.table.total), 0.0f);
  for (int s = 1; s <= kSteps; ++s) {
    for (const ParamInfo& p : o.table.params) {
      const std::vector<float> g = f.read_f32("grad." + std::to_string(s) + "." + p.name);
      std::copy(g.begin(), g.end(), grads.begin() + p.offset);
    }
    OptimStepInfo info;
    info.step = s;
    info.lr = schedule_lr(config, s, kSteps);
    info.total_steps = kSteps;
    info.compute = Tensor(o.compute.data(), DType::kF32);
    o.opt->step(o.master.data(), Tensor(grads.data(), DType::kF32), info);
  }
  return o;
}

// `got` (flat layout) against the fixture's `<prefix>.<name>` per tensor.
void expect_tensors(const SafeTensorsFile& f, const Outcome& o, const std::vector<float>& got,
                    const std::string& prefix, double atol, double rtol) {
  for (const ParamInfo& p : o.table.params) {
    const std::vector<float> ref = f.read_f32(prefix + "." + p.name);
    ASSERT_EQ(static_cast<int64_t>(ref.size()), p.numel);
    const auto r = testing::compare_tensor(f.path() + " " + prefix + "." + p.name,
                                           got.data() + p.offset, ref.data(), p.numel, atol, rtol);
    EXPECT_TRUE(r.ok) << r.message;
    std::printf("  %-28s max|diff| %.3g (bound %.3g)\n", (prefix + "." + p.name).c_str(),
                r.max_abs_diff, r.bound);
  }
}

// Every state view against the fixture's `state.<param>.<view>`; `expected` views per tensor.
void expect_states(const SafeTensorsFile& f, Outcome& o, double atol, double rtol,
                   const std::map<std::string, int>& expected) {
  std::map<std::string, int> seen;
  for (const StateView& v : o.opt->state_views()) {
    if (v.param < 0) continue;  // optimizer-wide scalars: no counterpart
    const std::string& pname = o.table.params[static_cast<size_t>(v.param)].name;
    ++seen[pname];
    std::vector<float> got(static_cast<size_t>(v.numel));
    if (v.dtype == DType::kF32) {
      const float* src = static_cast<const float*>(v.data);
      got.assign(src, src + v.numel);
    } else {
      FAIL() << "state " << v.name << " is not fp32";
    }
    const std::string name = "state." + pname + "." + v.name;
    const std::vector<float> ref = f.read_f32(name);
    ASSERT_EQ(static_cast<int64_t>(ref.size()), v.numel) << name;
    const auto r =
        testing::compare_tensor(f.path() + " " + name, got.data(), ref.data(), v.numel, atol, rtol);
    EXPECT_TRUE(r.ok) << r.message;
    std::printf("  %-28s max|diff| %.3g (bound %.3g)\n", name.c_str(), r.max_abs_diff, r.bound);
  }
  EXPECT_EQ(seen, expected) << "state tensors per parameter";
}

// A constant-schedule config of optimizer `name` whose listed fields are the fixture's
// hyperparameters: each "hp.KEY" into the field it is paired with.
OptimConfig golden_config(const SafeTensorsFile& f, const char* name,
                          std::initializer_list<std::pair<const char*, double OptimConfig::*>> hp) {
  OptimConfig c;
  c.name = name;
  c.schedule = "constant";
  for (const auto& [key, field] : hp) c.*field = meta(f, std::string("hp.") + key);
  return c;
}

TEST(OptimGolden, LionMatchesLionPytorch) {
  const SafeTensorsFile f = SafeTensorsFile::open(fixture("lion"));
  const OptimConfig c = golden_config(f, "lion",
                                      {{"lr", &OptimConfig::lr},
                                       {"beta1", &OptimConfig::lion_beta1},
                                       {"beta2", &OptimConfig::lion_beta2},
                                       {"weight_decay", &OptimConfig::weight_decay}});
  Outcome o = run_case(f, c);
  expect_tensors(f, o, o.master, "final", 1e-7, 1e-5);
  expect_states(f, o, 1e-7, 1e-5, {{"a", 1}, {"b", 1}, {"e", 1}, {"c", 1}});
}

TEST(OptimGolden, AdEMAMixMatchesAuthorsCode) {
  const SafeTensorsFile f = SafeTensorsFile::open(fixture("ademamix"));
  OptimConfig c = golden_config(f, "ademamix",
                                {{"lr", &OptimConfig::lr},
                                 {"beta1", &OptimConfig::beta1},
                                 {"beta2", &OptimConfig::beta2},
                                 {"beta3", &OptimConfig::ademamix_beta3},
                                 {"alpha", &OptimConfig::ademamix_alpha},
                                 {"eps", &OptimConfig::eps},
                                 {"weight_decay", &OptimConfig::weight_decay}});
  ASSERT_EQ(meta(f, "hp.alpha_warmup"), meta(f, "hp.beta3_warmup"));
  c.ademamix_warmup = static_cast<int64_t>(meta(f, "hp.alpha_warmup"));
  Outcome o = run_case(f, c);
  expect_tensors(f, o, o.master, "final", 1e-7, 1e-5);
  expect_states(f, o, 1e-7, 1e-5, {{"a", 3}, {"b", 3}, {"e", 3}, {"c", 3}});
}

TEST(OptimGolden, ScheduleFreeMatchesAuthorsCodeInXAndY) {
  const SafeTensorsFile f = SafeTensorsFile::open(fixture("adamw_schedulefree"));
  OptimConfig c = golden_config(f, "adamw_schedulefree",
                                {{"lr", &OptimConfig::lr},
                                 {"beta1", &OptimConfig::beta1},
                                 {"beta2", &OptimConfig::beta2},
                                 {"eps", &OptimConfig::eps},
                                 {"weight_decay", &OptimConfig::weight_decay},
                                 {"weight_lr_power", &OptimConfig::sf_weight_lr_power}});
  c.warmup_steps = static_cast<int64_t>(meta(f, "hp.warmup_steps"));
  ASSERT_EQ(meta(f, "hp.r"), 0.0);
  Outcome o = run_case(f, c);
  ASSERT_TRUE(o.opt->writes_compute_copy());
  // The master holds x (the authors' weights after eval()), the compute copy y (after train()).
  expect_tensors(f, o, o.master, "x", 1e-7, 1e-5);
  expect_tensors(f, o, o.compute, "final", 1e-7, 1e-5);
  expect_states(f, o, 1e-7, 1e-5, {{"a", 2}, {"b", 2}, {"e", 2}, {"c", 2}});
  // x and y are different points (the test would pass vacuously if they were not).
  double gap = 0.0;
  for (size_t i = 0; i < o.master.size(); ++i)
    gap = std::max(gap, static_cast<double>(std::fabs(o.master[i] - o.compute[i])));
  EXPECT_GT(gap, 1e-3);
  // write_training_weights rebuilds y from x and z: the step's y.
  std::vector<float> y(o.compute.size(), 0.0f);
  o.opt->write_training_weights(o.master.data(), Tensor(y.data(), DType::kF32));
  for (const ParamInfo& p : o.table.params) {
    const auto r = testing::compare_tensor("rebuilt y " + p.name, y.data() + p.offset,
                                           o.compute.data() + p.offset, p.numel, 0.0, 1e-6);
    EXPECT_TRUE(r.ok) << r.message;
  }
}

OptimConfig muon_config(const SafeTensorsFile& f) {
  OptimConfig c = golden_config(f, "muon",
                                {{"muon_lr", &OptimConfig::lr},
                                 {"muon_weight_decay", &OptimConfig::weight_decay},
                                 {"muon_momentum", &OptimConfig::muon_momentum},
                                 {"muon_eps", &OptimConfig::ns_eps},
                                 {"adamw_lr", &OptimConfig::muon_adamw_lr},
                                 {"adamw_beta1", &OptimConfig::beta1},
                                 {"adamw_beta2", &OptimConfig::beta2},
                                 {"adamw_eps", &OptimConfig::eps}});
  c.muon_nesterov = f.metadata().at("hp.muon_nesterov") == "True";
  c.ns_steps = static_cast<int64_t>(meta(f, "hp.muon_ns_steps"));
  c.muon_adjust_lr =
      f.metadata().at("hp.muon_adjust_lr_fn") == "match_rms_adamw" ? "match_rms_adamw" : "original";
  EXPECT_EQ(meta(f, "hp.adamw_weight_decay_e"), c.weight_decay);  // one decay for both groups
  return c;
}

// Ours against the fixture's, on the update final - init (what the optimizer changed).
void expect_updates(const SafeTensorsFile& f, const Outcome& o, const SafeTensorsFile& ref_file,
                    double atol, double rtol, std::map<std::string, double>* gaps = nullptr) {
  for (const ParamInfo& p : o.table.params) {
    const std::vector<float> init = f.read_f32("init." + p.name);
    const std::vector<float> ref = ref_file.read_f32("final." + p.name);
    std::vector<float> got_u(init.size()), ref_u(init.size());
    for (size_t i = 0; i < init.size(); ++i) {
      got_u[i] = o.master[static_cast<size_t>(p.offset) + i] - init[i];
      ref_u[i] = ref[i] - init[i];
    }
    const auto r = testing::compare_tensor(ref_file.path() + " update " + p.name, got_u.data(),
                                           ref_u.data(), p.numel, atol, rtol);
    EXPECT_TRUE(r.ok) << r.message;
    std::printf("  update.%-21s max|diff| %.3g (bound %.3g)\n", p.name.c_str(), r.max_abs_diff,
                r.bound);
    if (gaps) (*gaps)[p.name] = r.max_abs_diff;
  }
}

TEST(OptimGolden, MuonHybridMatchesTorchMuonAndAdamW) {
  for (const char* name : {"muon_fp32", "muon_rms"}) {
    SCOPED_TRACE(name);
    const SafeTensorsFile f = SafeTensorsFile::open(fixture(name));
    Outcome o = run_case(f, muon_config(f));
    expect_updates(f, o, f, 1e-7, 2e-5);
    // Momentum for the orthogonalised weights, AdamW's m and v for the others.
    expect_states(f, o, 1e-7, 1e-5, {{"a", 1}, {"b", 1}, {"e", 2}, {"c", 2}});
  }
}

// torch's stock Muon orthogonalises in bf16: ours (fp32) is as far from it as the fixture's own
// fp32 run is, no farther (the gap is bf16 rounding, ~2^-8 of the update).
TEST(OptimGolden, MuonFp32IsAsCloseToTorchsBf16AsTorchsOwnFp32) {
  const SafeTensorsFile bf16 = SafeTensorsFile::open(fixture("muon_bf16"));
  const SafeTensorsFile fp32 = SafeTensorsFile::open(fixture("muon_fp32"));
  Outcome o = run_case(bf16, muon_config(bf16));
  for (const char* p : {"a", "b"}) {
    const std::vector<float> x = bf16.read_f32(std::string("final.") + p);
    const std::vector<float> y = fp32.read_f32(std::string("final.") + p);
    double torch_gap = 0.0, our_gap = 0.0;
    const ParamInfo& info = o.table.params[static_cast<size_t>(o.table.index_of(p))];
    for (size_t i = 0; i < x.size(); ++i) {
      torch_gap = std::max(torch_gap, static_cast<double>(std::fabs(x[i] - y[i])));
      our_gap = std::max(
          our_gap,
          static_cast<double>(std::fabs(o.master[static_cast<size_t>(info.offset) + i] - x[i])));
    }
    std::printf("  %s: |torch bf16 - torch fp32| %.3g, |ours - torch bf16| %.3g\n", p, torch_gap,
                our_gap);
    EXPECT_GT(torch_gap, 1e-5) << "the fixtures' bf16 and fp32 runs should differ";
    EXPECT_LE(our_gap, 1.1 * torch_gap + 1e-6) << p;
  }
}

}  // namespace
}  // namespace ledgerlm
