// The unit-boundary contract of unit_access.h, seen from outside the model:
//   - the exact announcement sequence for every recompute mode, forward and backward;
//   - the model touches a unit's weights only while it is acquired and its gradients only while
//     acquired for backward and not yet final: a test implementation keeps every unit in its own
//     buffer, fills it with NaN on release (as a sharded trainer would free it) and gathers it
//     again on acquire; gradients go to per-unit buffers that are folded into a flat result at
//     grads_done and then poisoned. Loss and gradients must equal the flat run bit for bit (the
//     same ops in the same order on the same values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "model/unit_access.h"
#include "tests/support/config_test_support.h"

namespace ledgerlm {
namespace {

ModelConfig units_config(const std::string& recompute, double dropout) {
  ModelConfig c = testing::model_config_of({.vocab = 40, .L = 3, .H = 2, .C = 16, .block = 8});
  c.recompute = recompute;
  c.dropout = dropout;
  return c;
}

constexpr float kPoison = std::numeric_limits<float>::quiet_NaN();

// Units kept apart, gathered on acquire and poisoned on release; every event recorded.
class PoisoningUnits final : public UnitAccess {
 public:
  PoisoningUnits(const ParamTable& table, const std::vector<float>& flat_params)
      : grads_out(flat_params.size(), 0.0f), table_(table), flat_(flat_params) {
    for (const UnitInfo& u : table.units) {
      params_.emplace_back(static_cast<size_t>(u.size), kPoison);
      grads_.emplace_back(static_cast<size_t>(u.size), kPoison);
    }
    resident_.assign(table.units.size(), 0);
    grads_open_.assign(table.units.size(), false);
  }

  Tensor params(int unit) override {
    if (resident_[unit] == 0) violations.push_back("params(" + name(unit) + ") while released");
    return Tensor(params_[unit].data(), DType::kF32);
  }
  Tensor grads(int unit) override {
    if (!grads_open_[unit]) violations.push_back("grads(" + name(unit) + ") outside backward");
    return Tensor(grads_[unit].data(), DType::kF32);
  }
  void acquire(int unit, UnitPhase phase) override {
    events.push_back("acquire " + name(unit) + " " + unit_phase_name(phase));
    if (resident_[unit]++ == 0) {
      const UnitInfo& u = table_.units[unit];
      std::memcpy(params_[unit].data(), flat_.data() + u.offset, u.size * sizeof(float));
    }
    if (phase == UnitPhase::kBackward && !grads_open_[unit]) {
      grads_open_[unit] = true;
      std::fill(grads_[unit].begin(), grads_[unit].end(), 0.0f);
    }
  }
  void release(int unit, UnitPhase phase) override {
    events.push_back("release " + name(unit) + " " + unit_phase_name(phase));
    if (resident_[unit] == 0) violations.push_back("release of " + name(unit) + " not acquired");
    if (--resident_[unit] == 0) std::fill(params_[unit].begin(), params_[unit].end(), kPoison);
  }
  void grads_done(int unit) override {
    events.push_back("grads_done " + name(unit));
    if (!grads_open_[unit]) violations.push_back("grads_done(" + name(unit) + ") twice");
    const UnitInfo& u = table_.units[unit];
    for (int64_t i = 0; i < u.size; ++i) grads_out[u.offset + i] += grads_[unit][i];
    std::fill(grads_[unit].begin(), grads_[unit].end(), kPoison);
    grads_open_[unit] = false;
  }

  std::vector<std::string> events, violations;
  std::vector<float> grads_out;

 private:
  std::string name(int unit) const { return table_.units[unit].name; }
  const ParamTable& table_;
  const std::vector<float>& flat_;
  std::vector<std::vector<float>> params_, grads_;
  std::vector<int> resident_;
  std::vector<bool> grads_open_;
};

// The sequence unit_access.h documents, written out independently of the model.
std::vector<std::string> expected_events(int layers, const std::string& recompute) {
  std::vector<std::string> e;
  auto use = [&](const std::string& unit, const std::string& phase) {
    e.push_back("acquire " + unit + " " + phase);
    e.push_back("release " + unit + " " + phase);
  };
  use("embed", "forward");
  for (int l = 0; l < layers; ++l) use("block." + std::to_string(l), "forward");
  use("final", "forward");
  use("embed", "forward");
  use("embed", "backward");
  use("final", "backward");
  e.push_back("grads_done final");
  for (int l = layers - 1; l >= 0; --l) {
    const std::string b = "block." + std::to_string(l);
    if (recompute == "block") use(b, "recompute");
    use(b, "backward");
    e.push_back("grads_done " + b);
  }
  use("embed", "backward");
  e.push_back("grads_done embed");
  return e;
}

std::vector<float> init_params(const ParamTable& table, Backend& be) {
  std::vector<float> p(static_cast<size_t>(table.total), 0.0f);
  gpt_init_params(table, Tensor(p.data(), DType::kF32), 21, be);
  // Larger than the GPT-2 init so that every gradient is well above zero.
  for (float& v : p) v *= 8.0f;
  return p;
}

TEST(ModelUnits, AnnouncementSequenceAndResidencyForEveryRecomputeMode) {
  for (double dropout : {0.0, 0.2}) {
    for (const char* mode : {"none", "mlp", "block"}) {
      const ModelConfig cfg = units_config(mode, dropout);
      const ParamTable table = param_table_build(cfg);
      auto be = backend_create_cpu(2);
      std::vector<float> params = init_params(table, *be);
      const int64_t B = 2, T = 8;
      std::vector<int32_t> tokens(B * T), targets(B * T);
      for (int64_t i = 0; i < B * T; ++i) {
        tokens[i] = static_cast<int32_t>((11 * i + 3) % cfg.vocab_size);
        targets[i] = static_cast<int32_t>((7 * i + 5) % cfg.vocab_size);
      }
      ForwardOptions fo;
      fo.seed = 9;
      fo.step = 4;
      const std::string label = std::string(mode) + " dropout " + std::to_string(dropout);

      GptModel flat_model(cfg, table, *be, DType::kF32, DType::kF32);
      std::vector<float> flat_grads(params.size(), 0.0f);
      const double flat_loss = flat_model.forward(Tensor(params.data(), DType::kF32), tokens.data(),
                                                  targets.data(), B, T, fo);
      flat_model.backward(Tensor(params.data(), DType::kF32),
                          Tensor(flat_grads.data(), DType::kF32), 1.0);

      GptModel model(cfg, table, *be, DType::kF32, DType::kF32);
      PoisoningUnits units(table, params);
      const double loss = model.forward(units, tokens.data(), targets.data(), B, T, fo);
      model.backward(units, 1.0);

      EXPECT_EQ(units.events, expected_events(static_cast<int>(cfg.n_layer), mode)) << label;
      EXPECT_TRUE(units.violations.empty())
          << label << ": " << (units.violations.empty() ? "" : units.violations.front());
      EXPECT_EQ(std::memcmp(&loss, &flat_loss, sizeof loss), 0)
          << label << ": loss " << loss << " vs " << flat_loss;
      for (const ParamInfo& p : table.params) {
        const int64_t bad = [&] {
          for (int64_t i = 0; i < p.numel; ++i) {
            const float a = units.grads_out[p.offset + i], b = flat_grads[p.offset + i];
            if (std::memcmp(&a, &b, sizeof a) != 0) return i;
          }
          return int64_t{-1};
        }();
        EXPECT_EQ(bad, -1) << label << ": gradient of " << p.name << " differs at element " << bad;
      }
      double norm = 0.0;
      for (float g : flat_grads) norm += static_cast<double>(g) * g;
      EXPECT_GT(norm, 1e-6) << label << ": vacuous comparison";
    }
  }
}

// A forward without targets (evaluation, sampling) announces the forward half only.
TEST(ModelUnits, ForwardWithoutTargetsStopsAfterTheHead) {
  const ModelConfig cfg = units_config("none", 0.0);
  const ParamTable table = param_table_build(cfg);
  auto be = backend_create_cpu(1);
  std::vector<float> params = init_params(table, *be);
  GptModel model(cfg, table, *be, DType::kF32, DType::kF32);
  PoisoningUnits units(table, params);
  std::vector<int32_t> tokens(8, 1);
  ForwardOptions fo;
  fo.training = false;
  model.forward(units, tokens.data(), nullptr, 1, 8, fo);
  std::vector<std::string> want = expected_events(static_cast<int>(cfg.n_layer), "none");
  want.resize(2 * (static_cast<size_t>(cfg.n_layer) + 3));
  EXPECT_EQ(units.events, want);
  EXPECT_TRUE(units.violations.empty());
  for (int64_t i = 0; i < cfg.vocab_size; ++i)
    ASSERT_TRUE(std::isfinite(model.logits().as<float>()[i]));
}

}  // namespace
}  // namespace ledgerlm
