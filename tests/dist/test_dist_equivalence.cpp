// Data-parallel training matches one process. World 2 and 4 at ZeRO stages 0-3, for every
// optimizer, for bf16 weights + fp32 master, gradient accumulation, dropout and the Llama and
// nanochat block presets: the loss curve, the final weights and every optimizer state equal
// those of a single process trained on the same global batch (8 sequences: world x micro-batch x
// accumulation), per tensor within atol + rtol x max|ref|. Not bitwise: the ranks' gradients are
// summed across ranks instead of inside one GEMM over the whole batch, and the gradient norm and
// LAMB/LARS/Adafactor per-tensor statistics are summed from per-rank parts — the same values added
// in another order. The same world and stage run twice is bitwise identical (the collectives and
// kernels are deterministic for a given world, thread count and stage).
//
// One exception, compared differently: the key part of every attn.qkv.bias. Its gradient is
// zero in exact arithmetic (adding a constant to every key's logit leaves a softmax unchanged),
// so the computed gradient is pure rounding noise, and optimizers that normalise the step (AdamW,
// LAMB, Adafactor) turn any reordering of that noise into an O(lr) step of random sign — the
// same happens with another thread count. Those 32 elements per layer are checked against a
// bound of 2 x lr x steps instead (what they may move at most), the rest of the tensor as above.
//
// Each world runs every configuration in one mpirun launch (tests/dist/dist_runner.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"

namespace ledgerlm {
namespace {

using testing::CommandResult;

// The largest LR among the variants (LARS's local LR is a small fraction of its lr) and steps.
constexpr double kLr = 0.1;
constexpr int kSteps = 4;

struct Variant {
  std::string label, flags;
  double loss_rtol, weight_rtol, state_rtol;  // see the tolerance notes below
};

// Tolerances, per tensor relative to max|ref| (measured maxima over both worlds and all stages in
// brackets). fp32 runs: the reordered sums differ by fp32 rounding, which four AdamW-type steps
// turn into weight differences of a few 1e-6 of the tensor's scale [loss 4.6e-9, weights
// 8.3e-6 (accumulation), states 2.2e-6]; the bounds (loss 1e-7, weights 1e-4, states 3e-5) sit
// ~10-20x above, and far below a real fault: a rank's gradient missing or counted twice moves
// the loss by >1e-3 and weights by ~lr = 3e-3 of their ~0.02 scale. bf16 weights: a master
// weight an ulp apart can round to the neighbouring bf16 value (4e-3 relative), which moves
// nearby gradients and so the moments [weights 3.2e-5, states 4.4e-5, in the sanitizer build's
// code]: 3e-4 for both.
// Adafactor: its first step is sign(g) x rho per element (v = g^2 at t = 1, eps1 = 1e-30), so an
// element whose gradient is at the rounding level (several in the attention biases) gets an
// O(rho) step of either sign [weights 3.8e-3, states 9.2e-3]: 2e-2 and 5e-2. 8-bit AdamW: a
// state on the edge between two codes can be quantized to the neighbouring code, so its states
// are not compared element by element; the weights they produce are, but such a flip moves that
// element's update by one code step (up to ~2^-6 of an update of size ~lr), so the weights get
// the bound 1e-3 [weights 1.1e-4 with the AVX2 kernels in the sanitizer build's code, where
// -O1 rounds the reduction differently; ~1e-5 elsewhere], still ~100x below what a missing or
// doubled rank's gradient does (~lr = 3e-3 of a ~0.02 scale).
// Muon with bf16 weights: Newton-Schulz amplifies rounding in a matrix's small singular
// directions (the quintic's slope at 0 is a = 3.4445, up to a^5 ~ 480 over five steps), so the
// reduce-order rounding moves the fp32 master ~100x more than AdamW's does, and more masters
// land on the neighbouring bf16 value: compute copies one bf16 ulp apart, which is up to 2^-7 =
// 7.8e-3 of a tensor's largest element (bf16 keeps 8 significant bits; the ulp is 2^-7 of a
// value at the bottom of its binade) [weights 3.6e-3 in the Release build, 7.3e-3 in the
// sanitizer build's code; states 4.9e-4, loss 1.6e-5]: 1e-2, 1e-3 and 1e-4, the loss bound still
// 10x below what a missing or doubled rank's gradient does to it (the fp32 Muon run, whose
// masters are compared at fp32, stays within the fp32 bounds [weights 8.0e-6]).
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
      {"sgd", " --optim.name sgd --optim.lr 0.1 --optim.momentum 0.9 --optim.grad_clip 0", 1e-7,
       1e-4, 3e-5},
      {"adamw", " --optim.name adamw", 1e-7, 1e-4, 3e-5},
      {"lamb", " --optim.name lamb --optim.lr 1e-2", 1e-7, 1e-4, 3e-5},
      {"lars", " --optim.name lars --optim.lr 1 --optim.momentum 0.9", 1e-7, 1e-4, 3e-5},
      {"adafactor", " --optim.name adafactor --optim.adafactor_beta1 0.9", 1e-7, 2e-2, 5e-2},
      {"adamw8bit", " --optim.name adamw8bit", 1e-7, 1e-3, -1},
      {"bf16", " --optim.name adamw --precision.params bf16 --precision.master fp32", 1e-7, 3e-4,
       3e-4},
      {"accum", " --optim.name adamw --train.accum 2", 1e-7, 1e-4, 3e-5},
      {"dropout", " --optim.name adamw --model.dropout 0.1", 1e-7, 1e-4, 3e-5},
      {"lion", " --optim.name lion --optim.lr 1e-3 --optim.weight_decay 1", 1e-7, 1e-4, 3e-5},
      {"schedulefree", " --optim.name adamw_schedulefree --optim.schedule constant", 1e-7, 1e-4,
       3e-5},
      {"ademamix", " --optim.name ademamix", 1e-7, 1e-4, 3e-5},
      // The average of the weights (optim.ema_half_life), sharded like the master: the weights
      // file compared is the average.
      {"ema", " --optim.name adamw --optim.ema_half_life 2048", 1e-7, 1e-4, 3e-5},
      // Newton-Schulz on gathered pieces (stages 1-3 exchange them; stage 0 orthogonalises on
      // every rank), fp32 weights and bf16 weights with an fp32 master.
      {"muon", " --optim.name muon --optim.lr 0.02", 1e-7, 1e-4, 3e-5},
      {"muon_bf16",
       " --optim.name muon --optim.lr 0.02 --precision.params bf16 --precision.master fp32", 1e-4,
       1e-2, 1e-3},
      // Only the trained tensors are sharded, reduced and stepped; frozen weights stay whole on
      // every rank (and are compared too: they must not move). Adapters with dropout on every
      // linear layer; a frozen bottom (embeddings and block 0: backward stops above it).
      {"lora",
       " --optim.name adamw --optim.lr 1e-2 --lora.rank 4 --lora.dropout 0.1"
       " --lora.targets qkv,attn_proj,mlp_fc,mlp_proj",
       1e-7, 1e-4, 3e-5},
      {"freeze", " --optim.name adamw --train.freeze embed.*,block.0.*", 1e-7, 1e-4, 3e-5},
      // The two block presets (configs/llama_demo.toml, configs/nanochat_demo.toml) on the tiny
      // shape: Llama's RMSNorm, rotary positions, SwiGLU and grouped-query attention (1 KV head)
      // with an untied head under Muon (gate, up and down, and the rectangular k and v pieces,
      // are Muon matrices); nanochat's weightless RMSNorm, QK-norm, ReLU^2 and soft-capped
      // untied head under AdamW. No biases in either. The nanochat block under AdamW moves one
      // element (block 1's fc weight) by up to 1.04e-4 of its tensor's scale [world 2; 7.2e-5 at
      // world 4; states 2.6e-5]; with any one of weightless RMSNorm, QK-norm, ReLU^2 or the
      // soft-cap taken out it stays below 2e-5. Together they leave an element whose gradient is
      // at the rounding level, which AdamW's normalised steps amplify (as for Adafactor above):
      // bounds 3e-4 and 1e-4, still ~100x below what a missing rank's gradient does (~lr = 3e-3
      // of a 0.08 scale).
      {"llama",
       " --optim.name muon --optim.lr 0.02 --model.norm rmsnorm --model.position rope"
       " --model.mlp swiglu --model.ffn_hidden 96 --model.n_kv_head 1 --model.bias false"
       " --model.tie_embeddings false",
       1e-7, 1e-4, 3e-5},
      {"nanochat",
       " --optim.name adamw --model.norm rmsnorm --model.norm_weight false --model.position rope"
       " --model.qk_norm true --model.mlp relu2 --model.bias false --model.tie_embeddings false"
       " --model.logit_softcap 15",
       1e-7, 3e-4, 1e-4},
  };
  return v;
}

class DistEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::mpirun_path().empty()) return;
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "And the earth was without form, and void; line " + std::to_string(i) + ".\n";
    data_ = testing::resume_prepare_corpus("ledgerlm_dist_eq_", text);
    out_ = std::filesystem::path(data_).parent_path().string() + "/runs";
  }

  // 4 steps of the tiny model, global batch 8 = world x micro x accum.
  static std::string flags(const std::string& name, int world, int stage, const Variant& v) {
    const int accum = v.label == "accum" ? 2 : 1;
    const int micro = 8 / world / accum;
    return testing::resume_tiny_flags(data_, out_, name) + " --train.max_steps " +
           std::to_string(kSteps) + " --optim.warmup_steps 0 --train.micro_batch " +
           std::to_string(micro) + " --dist.zero " + std::to_string(stage) +
           " --train.eval_windows 8" + v.flags;
  }
  static std::string name(int world, int stage, const std::string& label) {
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "w%dz%d_", world, stage);
    return prefix + label;
  }
  static std::string dir(const std::string& run) { return out_ + "/" + run; }

  static std::string data_, out_;
};
std::string DistEquivalence::data_, DistEquivalence::out_;

void compare_run(const std::string& got_dir, const std::string& ref_dir, const Variant& v,
                 const std::string& label) {
  double worst_loss = 0.0;
  // The loss and the gradient norm of every step (the norm also sees a gradient of the wrong
  // scale, which clipping and scale-invariant optimizers would hide from the weights).
  for (const char* key : {"loss", "grad_norm"}) {
    const std::vector<double> got = testing::run_series(got_dir, key);
    const std::vector<double> ref = testing::run_series(ref_dir, key);
    ASSERT_EQ(got.size(), ref.size()) << label << " " << key;
    for (size_t s = 0; s < ref.size(); ++s) {
      // The norm sums squares of reordered gradients: [6.0e-8] against a bound of 1e-6 (or the
      // variant's loss bound where that is wider: Muon with bf16 weights, see above).
      const double rtol = std::string(key) == "loss" ? v.loss_rtol : std::max(1e-6, v.loss_rtol);
      EXPECT_NEAR(got[s], ref[s], rtol * std::fabs(ref[s]))
          << label << " " << key << " at step " << s + 1;
      worst_loss = std::max(worst_loss, std::fabs(got[s] - ref[s]) / std::fabs(ref[s]));
    }
  }
  const auto a = testing::run_tensors(got_dir), b = testing::run_tensors(ref_dir);
  ASSERT_EQ(a.size(), b.size()) << label << ": a different set of tensors";
  double worst_weight = 0.0, worst_state = 0.0;
  for (const auto& [key, ref_values] : b) {
    auto it = a.find(key);
    ASSERT_NE(it, a.end()) << label << ": " << key << " missing";
    const bool state = key.rfind("optimizer/", 0) == 0;
    if (state && v.state_rtol < 0) continue;
    const double rtol = state ? v.state_rtol : v.weight_rtol;
    std::vector<double> got_values = it->second, ref_kept = ref_values;
    if (key.find("attn.qkv.bias") != std::string::npos) {  // the key part: see above
      const size_t c = ref_values.size() / 3;
      if (!state) {
        for (size_t i = c; i < 2 * c; ++i)
          EXPECT_LE(std::fabs(got_values[i] - ref_values[i]), 2 * kLr * kSteps)
              << label << " " << key << "[" << i << "]";
      }
      got_values.erase(got_values.begin() + c, got_values.begin() + 2 * c);
      ref_kept.erase(ref_kept.begin() + c, ref_kept.begin() + 2 * c);
    }
    auto r = testing::compare_tensor(label + " " + key, got_values.data(), ref_kept.data(),
                                     static_cast<int64_t>(ref_kept.size()), 1e-12, rtol);
    EXPECT_TRUE(r.ok) << r.message;
    double scale = 0.0;
    for (double x : ref_kept) scale = std::max(scale, std::fabs(x));
    const double rel = scale > 0 ? r.max_abs_diff / scale : 0.0;
    (state ? worst_state : worst_weight) = std::max(state ? worst_state : worst_weight, rel);
  }
  std::printf("%-16s max relative difference: loss/norm %.2e, weights %.2e, states %.2e\n",
              label.c_str(), worst_loss, worst_weight, worst_state);
}

// Under the sanitizers (the CI's second pass, ~8x slower) the test runs a cover instead of the
// product: each variant once, at one of the 8 (world, stage) cells, every cell with two or
// three variants. The sanitizers look for memory and UB faults along code paths, and the cover
// walks every optimizer's and every stage's path; the Release pass runs the whole product, which is
// what checks the arithmetic of each combination.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kFullProduct = false;
#else
constexpr bool kFullProduct = true;
#endif
// Variant i's cell in the cover: world 2 stages 0-3 are cells 0-3, world 4 stages 0-3 cells 4-7.
// The stride 3 (coprime to 8) spreads neighbouring variants (adamw, lamb, lars...) over both
// worlds and all stages.
int cover_cell(size_t variant) {
  return static_cast<int>((variant * 3) % 8);
}

TEST_F(DistEquivalence, EveryStageAndOptimizerMatchesOneProcess) {
  LEDGERLM_REQUIRE_MPI();
  std::vector<std::string> refs;
  for (const Variant& v : variants()) refs.push_back(flags(name(1, 0, v.label), 1, 0, v));
  // One rank: every stage is stage 0 (nothing to shard), so the same run bit for bit.
  for (int stage = 1; stage <= 3; ++stage)
    refs.push_back(flags(name(1, stage, "adamw"), 1, stage, variants()[1]));
  CommandResult r = testing::run_many(1, refs, out_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int stage = 1; stage <= 3; ++stage) {
    const std::vector<double> a = testing::run_losses(dir(name(1, stage, "adamw")));
    const std::vector<double> b = testing::run_losses(dir(name(1, 0, "adamw")));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0)
        << "world 1, dist.zero " << stage;
  }
  for (int world : {2, 4}) {
    std::vector<std::pair<int, const Variant*>> cells;  // (stage, variant) at this world
    for (int stage = 0; stage <= 3; ++stage)
      for (size_t i = 0; i < variants().size(); ++i)
        if (kFullProduct || cover_cell(i) == (world == 2 ? 0 : 4) + stage)
          cells.push_back({stage, &variants()[i]});
    std::vector<std::string> runs;
    for (const auto& [stage, v] : cells)
      runs.push_back(flags(name(world, stage, v->label), world, stage, *v));
    r = testing::run_many(world, runs, out_);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const auto& [stage, v] : cells)
      compare_run(dir(name(world, stage, v->label)), dir(name(1, 0, v->label)), *v,
                  name(world, stage, v->label));
  }
}

// The same world and stage twice: losses, weights and states bitwise equal.
TEST_F(DistEquivalence, SameWorldAndStageTwiceIsBitwise) {
  LEDGERLM_REQUIRE_MPI();
  // The sanitizer pass leak-checks these ranks (tests/support/dist_test_support.h): ZeRO-3 with
  // dropout and ZeRO-1, every collective of a run, start to exit.
  testing::RankLeakCheck leak_check;
  const Variant& adamw = variants()[1];
  const Variant& dropout = variants()[8];
  std::vector<std::string> runs = {flags("rep_a", 2, 3, dropout), flags("rep_b", 2, 3, dropout),
                                   flags("rep_c", 2, 1, adamw), flags("rep_d", 2, 1, adamw)};
  CommandResult r = testing::run_many(2, runs, out_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (auto [x, y] : {std::pair{"rep_a", "rep_b"}, std::pair{"rep_c", "rep_d"}}) {
    const std::vector<double> la = testing::run_losses(dir(x)), lb = testing::run_losses(dir(y));
    ASSERT_EQ(la.size(), lb.size());
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(double)), 0) << x;
    const auto a = testing::run_tensors(dir(x)), b = testing::run_tensors(dir(y));
    for (const auto& [key, values] : b)
      EXPECT_TRUE(a.at(key) == values) << x << " vs " << y << ": " << key << " differs";
  }
}

// optim.offload = disk at world 2, ZeRO 1 and 3 (each rank streams its shard of the master and
// the state through a 64 KiB arena): losses, weights and optimizer states bitwise equal to the
// same world and stage without offload, for every optimizer at stage 1 and six variants at
// stage 3 (only where the bytes live differs).
TEST_F(DistEquivalence, DiskOffloadIsBitwiseUnderZero) {
  LEDGERLM_REQUIRE_MPI();
  const std::string offload = " --optim.offload disk --optim.offload_staging_mb 0.0625";
  std::vector<std::string> runs;
  std::vector<std::pair<std::string, std::string>> pairs;
  // Stage 3 (the compute copy sharded too) for a subset: the offload path is the same.
  auto at_stage3 = [](const Variant& v) {
    return v.label == "adamw" || v.label == "bf16" || v.label == "lamb" || v.label == "adamw8bit" ||
           v.label == "muon_bf16" || v.label == "lora";
  };
  for (int stage : {1, 3})
    for (const Variant& v : variants()) {
      if (v.label == "accum" || v.label == "dropout" || v.label == "freeze") continue;
      if (v.label == "ema") continue;  // the weight average is refused with offload
      if (stage == 3 && !at_stage3(v)) continue;
      // Under the sanitizers (the cover, see above) each variant pages once: the subset at
      // stage 3 only.
      if (!kFullProduct && stage == 1 && at_stage3(v)) continue;
      Variant off = v;
      off.flags += offload;
      const std::string plain = name(2, stage, "plain_" + v.label);
      const std::string paged = name(2, stage, "disk_" + v.label);
      runs.push_back(flags(plain, 2, stage, v));
      runs.push_back(flags(paged, 2, stage, off));
      pairs.emplace_back(plain, paged);
    }
  CommandResult r = testing::run_many(2, runs, out_);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& [plain, paged] : pairs) {
    const std::vector<double> la = testing::run_losses(dir(plain));
    const std::vector<double> lb = testing::run_losses(dir(paged));
    ASSERT_EQ(la.size(), lb.size()) << paged;
    EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(double)), 0) << paged;
    // (With fp32 weights the offloaded run keeps a separate master, so its checkpoint also
    // holds the compute copy: tensors the plain run has no file for.)
    const auto a = testing::run_tensors(dir(plain)), b = testing::run_tensors(dir(paged));
    for (const auto& [key, values] : a) {
      ASSERT_TRUE(b.count(key)) << paged << ": " << key << " missing";
      EXPECT_TRUE(b.at(key) == values) << paged << ": " << key << " differs from " << plain;
    }
    for (const auto& [key, values] : b)  // the extra compute copy: the fp32 weights themselves
      if (!a.count(key)) {
        ASSERT_EQ(key.rfind("compute/", 0), 0u) << paged << ": unexpected " << key;
        EXPECT_TRUE(a.at("model/" + key.substr(8)) == values) << paged << ": " << key;
      }
  }
}

}  // namespace
}  // namespace ledgerlm
