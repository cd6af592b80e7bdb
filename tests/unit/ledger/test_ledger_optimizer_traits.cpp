// The cost of adding an optimizer: a dummy one ("heavyball": h = 0.5 h + g, w -= lr h, one fp32
// state tensor per parameter) is registered through the optimizer traits table alone, from this
// file, and everything outside the optimizer handles it to the byte with no edit of its own:
//   - the memory planner predicts its state component (total and per rank under ZeRO-1);
//   - the per-tensor prediction `ledgerlm memory --tensors` prints (plan_tensors_from_table and
//     plan_tensor_states, the functions the command calls) names its state for each tensor part;
//   - the run's checks before step 1 (RunLedger: component by component, tensor by tensor)
//     accept its real allocation, and the tracker measures exactly the predicted bytes;
//   - a checkpoint saved after two steps loads into a fresh model state with every state and
//     master byte equal.
// A second entry that claims a state the optimizer does not allocate is refused by the same
// checks: they read the traits, not a list of their own.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
#include "optim/optim_common.h"
#include "optim/optim_traits.h"
#include "tests/support/plan_test_support.h"
#include "tests/support/test_util.h"
#include "tests/support/train_test_support.h"
#include "train/config/config_keys.h"
#include "train/ledger/ledger.h"
#include "train/ledger/memory_plan.h"
#include "train/ledger/tensor_states.h"
#include "train/step/model_state.h"
#include "train/step/placement.h"
#include "train/step/precision_plan.h"
#include "train/step/train_step.h"

namespace ledgerlm {
namespace {

constexpr const char* kHeavyball = "test_heavyball";
constexpr const char* kOverclaimed = "test_heavyball_overclaimed";

// The whole optimizer: host loops, as the CPU backend's buffers are host memory.
class HeavyballOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return config_.name; }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    LLM_REQUIRE(grads.dtype == DType::kF32, "heavyball: fp32 gradients only");
    const float lr = static_cast<float>(info.lr), scale = static_cast<float>(info.grad_scale);
    float* h = h_.as<float>();
    for (const OptimSegment& seg : segs_) {
      const float* g = grads.as<float>() + seg.grad_at;
      for (int64_t i = 0; i < seg.count; ++i) {
        float& hi = h[seg.local + i];
        hi = 0.5f * hi + scale * g[i];
        master[seg.master_at + i] -= lr * seg.lr_mult * hi;
      }
    }
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (const OptimSegment& seg : segs_)
      views.push_back(mirror_view("h", seg, h_, DType::kF32, seg.local));
    return views;
  }

 protected:
  void on_init() override {
    h_ = allocate_state("h", MemTag::kOptimMomentum, DType::kF32, length_);
  }

 private:
  Buffer h_;
};

std::unique_ptr<Optimizer> heavyball_create(const OptimConfig& config) {
  return std::make_unique<HeavyballOptimizer>(config);
}

OptimTraits heavyball_traits(const char* name) {
  OptimTraits t;
  t.name = name;
  t.create = heavyball_create;
  StateComponentTraits h;
  h.name = "h";
  h.tag = MemTag::kOptimMomentum;
  h.dtype = StateDtypeRule::kF32;
  t.states = {h};
  return t;
}

// Registered once per process, before any test reads the table.
void register_heavyball() {
  static const bool once = [] {
    optim_traits_register(heavyball_traits(kHeavyball));
    OptimTraits over = heavyball_traits(kOverclaimed);
    StateComponentTraits extra = over.states[0];
    extra.name = "extra";
    over.states.push_back(extra);
    optim_traits_register(over);
    return true;
  }();
  (void)once;
}

RunConfig heavyball_config(const char* name = kHeavyball) {
  register_heavyball();
  RunConfig c = testing::tiny_config_make(name, 11);
  c.optim.lr = 1e-2;
  c.optim.schedule = "constant";
  return c;
}

TEST(LedgerOptimizerTraits, ARegisteredOptimizerIsKnownByNameAndValidated) {
  const RunConfig c = heavyball_config();
  EXPECT_NE(optim_names_text(", ", " or ").find(kHeavyball), std::string::npos);
  EXPECT_EQ(testing::error_of([&] { c.optim.validate(); }), "");
  EXPECT_EQ(optimizer_create(c.optim)->name(), kHeavyball);
  // One fp32 state per parameter: 4 bytes of state, 8 with the master.
  EXPECT_EQ(plan_optimizer_bytes_per_param(c.optim), 8.0);
  EXPECT_EQ(optimizer_create(c.optim)->state_bytes_per_param(), 4.0);
  // A name taken twice is refused.
  EXPECT_NE(testing::error_of([] {
              optim_traits_register(heavyball_traits(kHeavyball));
            }).find("is registered already"),
            std::string::npos);
  OptimConfig bad = c.optim;
  bad.name = "no_such_optimizer";
  const std::string e = testing::error_of([&] { bad.validate(); });
  EXPECT_NE(e.find("optim.name: expected sgd, adamw,"), std::string::npos) << e;
  EXPECT_NE(e.find(kHeavyball), std::string::npos) << e;
}

TEST(LedgerOptimizerTraits, ThePlannerAndThePerTensorTablePredictTheDummysState) {
  const RunConfig c = heavyball_config();
  const ParamTable table = param_table_for_run(c, 1);
  const MemoryPlan one = memory_plan_compute(plan_input_from_config(c, 1, 1, -1));
  const PlanComponent* h = testing::plan_component(one, "optim.h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->total_bytes, 4 * table.total);  // mirrors the layout, padding included
  EXPECT_EQ(h->tag, MemTag::kOptimMomentum);
  EXPECT_EQ(h->dtype, "fp32");
  // ZeRO-1 on 2 ranks: each rank's piece, summing to the whole.
  RunConfig c2 = c;
  c2.dist.zero = 1;
  int64_t sum = 0;
  for (int rank = 0; rank < 2; ++rank) {
    const MemoryPlan p = memory_plan_compute(plan_input_from_config(c2, 2, 1, -1, rank));
    sum += testing::plan_component(p, "optim.h")->per_rank_bytes;

    // What `ledgerlm memory --tensors --world 2 --rank R` prints per tensor.
    const ParamTable t2 = param_table_for_run(c2, 2);
    const PlacementTable placement =
        placement_build(t2, shard_layout_build(t2, 2, rank), 1, precision_plan(c2), c2.optim);
    const std::vector<PlanTensor> tensors = plan_tensors_from_table(t2, c2.optim, 2);
    int64_t held = 0;
    for (const TensorPlacement& tp : placement.tensors) {
      if (tp.state.count == 0) continue;
      const std::vector<TensorState> s =
          plan_tensor_states(c2.optim, tensors[static_cast<size_t>(tp.param)], tp.state.count);
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0].name, "h");
      EXPECT_EQ(s[0].dtype, DType::kF32);
      EXPECT_EQ(s[0].elements, tp.state.count);
      EXPECT_EQ(tensor_states_text(s).rfind("h:fp32x", 0), 0u) << tensor_states_text(s);
      held += tp.state.count;
    }
    EXPECT_GT(held, 0) << "rank " << rank;
  }
  EXPECT_EQ(sum, 4 * table.total);
}

// The state views' bytes, in order.
std::vector<std::vector<uint8_t>> state_bytes(ModelState& state) {
  std::vector<std::vector<uint8_t>> out;
  for (const StateView& v : state.optimizer().state_views()) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    out.emplace_back(p, p + v.numel * static_cast<int64_t>(dtype_size(v.dtype)));
  }
  return out;
}

TEST(LedgerOptimizerTraits, TheRunChecksAcceptItAndACheckpointRoundTripsItToTheByte) {
  const RunConfig c = heavyball_config();
  auto backend = backend_create_cpu(2);
  std::vector<std::vector<uint8_t>> saved_states;
  std::vector<uint8_t> saved_master;
  const std::string root = testing::make_temp_dir("heavyball_ckpt");
  std::string dir;
  {
    ModelState state(c, *backend);
    state.init_weights(11);
    // The checks before step 1: components and tensor states against the plan.
    std::unique_ptr<RunLedger> ledger;
    ASSERT_EQ(testing::error_of([&] { ledger = std::make_unique<RunLedger>(c, state, 1, 0); }), "");
    EXPECT_EQ(ledger->plan().per_rank_for_tag(MemTag::kOptimMomentum),
              backend->tracker().usage(MemTag::kOptimMomentum).current);
    EXPECT_NE(ledger->describe_tensors().find("h:fp32x"), std::string::npos);

    const int64_t B = c.train.micro_batch, T = c.train.seq_len;
    state.model().plan(B, T);
    static const std::vector<int32_t> corpus = testing::corpus_make(16);
    testing::CorpusBatches batches(corpus, 5, B, T,
                                   [](int64_t s, int64_t) { return static_cast<uint64_t>(s); });
    for (int64_t s = 1; s <= 2; ++s)
      EXPECT_FALSE(train_step(state, batches, s, c.optim.lr).skipped);
    saved_states = state_bytes(state);
    bool moved = false;
    for (const auto& s : saved_states)
      for (uint8_t b : s) moved = moved || b != 0;
    EXPECT_TRUE(moved) << "the state is still all zero after two steps";
    const auto* m = reinterpret_cast<const uint8_t*>(state.master());
    saved_master.assign(m, m + state.table().total * static_cast<int64_t>(sizeof(float)));
    dir = checkpoint_save(root, 2, {{"trainer", {{"step", 2}}}}, state.checkpoint_pieces()).dir;
  }
  ModelState fresh(c, *backend);
  fresh.init_weights(12);  // other weights: the load must replace them
  fresh.checkpoint_load(CheckpointReader::open(dir));
  const auto loaded = state_bytes(fresh);
  ASSERT_EQ(loaded.size(), saved_states.size());
  for (size_t i = 0; i < loaded.size(); ++i) EXPECT_TRUE(loaded[i] == saved_states[i]) << i;
  const auto* m = reinterpret_cast<const uint8_t*>(fresh.master());
  EXPECT_EQ(std::memcmp(m, saved_master.data(), saved_master.size()), 0);
}

TEST(LedgerOptimizerTraits, TraitsThatClaimAStateTheOptimizerLacksAreRefusedBeforeStep1) {
  const RunConfig c = heavyball_config(kOverclaimed);
  const MemoryPlan plan = memory_plan_compute(plan_input_from_config(c, 1, 1, -1));
  ASSERT_NE(testing::plan_component(plan, "optim.extra"), nullptr);
  auto backend = backend_create_cpu(2);
  ModelState state(c, *backend);
  const std::string e = testing::error_of([&] { RunLedger ledger(c, state, 1, 0); });
  EXPECT_NE(e.find("optimizer component 'optim.extra'"), std::string::npos) << e;
}

// The keys a row names as its own are real optim.* keys, each owned by one optimizer.
TEST(LedgerOptimizerTraits, EachOptimizersOwnKeysAreConfigKeysOfNoOtherOptimizer) {
  RunConfig c;
  std::map<std::string, int> registry;
  for (const ConfigKey& k : config_keys(c)) registry[k.full()] = 0;
  for (const OptimTraits* t : optim_traits_all())
    for (const std::string& key : t->keys) {
      ASSERT_TRUE(registry.count("optim." + key)) << t->name << ": optim." << key;
      EXPECT_EQ(++registry["optim." + key], 1) << "optim." << key << " claimed twice";
    }
  EXPECT_GE(registry["optim.ademamix_warmup"], 1);
}

}  // namespace
}  // namespace ledgerlm
