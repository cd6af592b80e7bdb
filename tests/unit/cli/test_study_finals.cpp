// The finals of a study (train/cli/study_finals.h): each arm's best setting (the lowest median
// loss over its sweep seeds) trained again with the fresh seeds, the same seeds in every arm; an
// arm waits for its whole sweep; a failed run makes its setting lose; the wall-clock finals replace
// the token budget by seconds for the arms named in `from`; [finals] bad input is one line.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/study_test_support.h"
#include "tests/support/test_util.h"
#include "train/cli/study_finals.h"
#include "train/cli/study_objective.h"
#include "train/cli/study_plan.h"

namespace ledgerlm {
namespace {

using json = nlohmann::json;
using testing::error_of;
using testing::write_study;

// Two optimizers x two budgets, a sweep of 5 LRs each, two sweep seeds; three fresh seeds.
const char* kStudy = R"(
baseline = "adamw"
[base]
"train.eval_interval" = 10
[axes]
"optim.name" = ["adamw", "sgd"]
"train.seed" = [1, 2]
"train.max_tokens" = [1000, 2000]
lr = "sweep"
lr_center = 1e-3
[grid.sgd]
lr = "sweep"
lr_center = 0.1
[finals]
seeds = [101, 102, 103]
select = ["optim.name", "train.max_tokens"]
[finals.wall_clock]
seconds = 30
from = { "train.max_tokens" = 2000 }
)";

// A loss for every sweep run: |log2(lr / best)| + budget term + seed noise, the best LR per arm
// given; the second seed of one adamw setting diverged.
std::map<std::string, std::optional<double>> losses(const json& manifest) {
  std::map<std::string, std::optional<double>> out;
  for (const json& r : manifest["runs"]) {
    const json& ov = r["overrides"];
    const double lr = std::stod(ov["optim.lr"].get<std::string>());
    const bool sgd = ov["optim.name"] == "sgd";
    const double best = sgd ? 0.2 : 6e-4;
    double loss = std::abs(std::log2(lr / best)) + (ov["train.max_tokens"] == "2000" ? 1.0 : 2.0) +
                  (ov["train.seed"] == "2" ? 0.01 : 0.0);
    out[r["name"]] = loss;
  }
  return out;
}

TEST(StudyFinals, BestSettingPerArmWithTheSameFreshSeeds) {
  json m = study_plan(write_study(kStudy), json());
  ASSERT_EQ(m["runs"].size(), 40u);  // 2 optimizers x 2 budgets x 5 LRs x 2 seeds
  EXPECT_EQ(m["finals"]["split"], "auto");
  EXPECT_EQ(m["finals"]["seeds"], json::array({101, 102, 103}));
  std::map<std::string, std::optional<double>> loss = losses(m);
  // adamw's best point (5e-4, nearest 6e-4) loses when one of its seeds failed: the next best,
  // 1e-3, is chosen for the 1000-token budget.
  loss["adamw_lr5e-04_max_tokens1000_seed2"] = std::numeric_limits<double>::infinity();
  // One run of sgd at 2000 tokens is still pending: that arm waits.
  loss["sgd_lr0.05_max_tokens2000_seed1"] = std::nullopt;
  auto loss_of = [&](const std::string& name) { return loss.at(name); };

  ASSERT_TRUE(study_plan_finals(&m, loss_of));
  const json& arms = m["finals"]["arms"];
  EXPECT_EQ(arms["adamw_max_tokens1000"]["from"], "adamw_lr0.001_max_tokens1000");
  EXPECT_EQ(arms["adamw_max_tokens2000"]["from"], "adamw_lr5e-04_max_tokens2000");
  EXPECT_EQ(arms["sgd_max_tokens1000"]["from"], "sgd_lr0.2_max_tokens1000");
  EXPECT_FALSE(arms.contains("sgd_max_tokens2000")) << "its sweep has a pending run";
  EXPECT_EQ(arms["adamw_max_tokens1000"]["settings"], 5);
  // The selection loss is the median over the two sweep seeds (their mean):
  // log2(1e-3 / 6e-4) + 2 + (0 + 0.01) / 2.
  EXPECT_NEAR(arms["adamw_max_tokens1000"]["selection_loss"].get<double>(),
              std::log2(1e-3 / 6e-4) + 2.005, 1e-12);

  std::map<std::string, json> finals;
  for (const json& r : m["runs"])
    if (r.contains("phase")) finals[r["name"]] = r;
  // 3 arms x 3 seeds, plus adamw at 2000 tokens x 3 seeds for 30 s.
  EXPECT_EQ(finals.size(), 12u);
  const json& f = finals.at("final_adamw_max_tokens2000_seed102");
  EXPECT_EQ(f["phase"], "final");
  EXPECT_EQ(f["arm"], "adamw_max_tokens2000");
  EXPECT_EQ(f["overrides"]["optim.lr"], "5e-04");
  EXPECT_EQ(f["overrides"]["train.seed"], "102");
  EXPECT_EQ(f["overrides"]["train.max_tokens"], "2000");
  EXPECT_EQ(f["overrides"]["train.eval_interval"], "10");
  EXPECT_EQ(f["axes"]["train.seed"], "102");
  EXPECT_FALSE(f.contains("sweep"));
  const json& w = finals.at("final_adamw_max_tokens2000_wall30s_seed101");
  EXPECT_TRUE(study_is_wall_clock(w));
  EXPECT_FALSE(study_is_wall_clock(f));
  EXPECT_EQ(w["overrides"]["train.max_seconds"], "30");
  EXPECT_EQ(w["overrides"]["train.max_tokens"], "0");
  EXPECT_EQ(w["overrides"]["optim.lr"], "5e-04");
  EXPECT_TRUE(arms["adamw_max_tokens2000_wall30s"]["wall_clock"].get<bool>());
  EXPECT_FALSE(finals.count("final_adamw_max_tokens1000_wall30s_seed101"))
      << "wall-clock finals only for the arms of `from`";

  // Nothing new until the pending run is known; then only that arm's finals are added.
  EXPECT_FALSE(study_plan_finals(&m, loss_of));
  loss["sgd_lr0.05_max_tokens2000_seed1"] = 9.0;
  const size_t before = m["runs"].size();
  ASSERT_TRUE(study_plan_finals(&m, loss_of));
  EXPECT_EQ(m["runs"].size(), before + 6);  // 3 seeds and 3 wall-clock seeds
  EXPECT_EQ(m["finals"]["arms"]["sgd_max_tokens2000"]["from"], "sgd_lr0.2_max_tokens2000");

  // Planning the file again onto this manifest keeps the finals and their choice.
  const json again = study_plan(write_study(kStudy), m);
  EXPECT_EQ(again["runs"], m["runs"]);
  EXPECT_EQ(again["finals"]["arms"], m["finals"]["arms"]);
}

TEST(StudyFinals, SeedMedianIsTheMiddleScoreAndAFailureCountsAsInfinite) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(study_seed_median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(study_seed_median({1.0, 2.0}), 1.5);  // two seeds: the mean
  EXPECT_EQ(study_seed_median({2.0, std::nan(""), 1.0}), 2.0);
  EXPECT_EQ(study_seed_median({1.0, inf, std::nan("")}), inf);  // two of three failed
  EXPECT_EQ(study_seed_median({}), inf);
}

// Three sweep seeds: the setting whose one seed spiked (losses 1, 1, 5: mean 2.33, median 1)
// beats the uniformly mediocre one (1.5 on every seed: mean and median 1.5) under the median,
// which is what a typical seed reaches; the mean would have picked the other.
TEST(StudyFinals, SelectsTheLowestSeedMedianNotTheLowestMean) {
  const char* study = R"(
[axes]
"optim.name" = ["adamw"]
"train.seed" = [1, 2, 3]
"optim.lr" = [1e-3, 2e-3]
"train.max_steps" = 10
[finals]
seeds = [101, 102]
)";
  json m = study_plan(write_study(study), json());
  ASSERT_EQ(m["runs"].size(), 6u);
  auto loss_of = [](const std::string& name) -> std::optional<double> {
    if (name.find("lr0.001") != std::string::npos) return name.ends_with("seed3") ? 5.0 : 1.0;
    return 1.5;
  };
  ASSERT_TRUE(study_plan_finals(&m, loss_of));
  const json& arm = m["finals"]["arms"]["adamw"];
  EXPECT_EQ(arm["from"], "adamw_lr0.001");
  EXPECT_EQ(arm["selection_loss"].get<double>(), 1.0);
}

TEST(StudyFinals, EveryFailedSettingMeansNoFinals) {
  json m = study_plan(write_study(kStudy), json());
  auto loss_of = [](const std::string&) -> std::optional<double> {
    return std::numeric_limits<double>::infinity();
  };
  EXPECT_FALSE(study_plan_finals(&m, loss_of));
  EXPECT_TRUE(m["finals"]["arms"]["adamw_max_tokens1000"]["from"].is_null());
  EXPECT_NE(m["finals"]["arms"]["adamw_max_tokens1000"]["note"].get<std::string>().find("failed"),
            std::string::npos);
}

TEST(StudyFinals, WithoutFinalsNothingChanges) {
  json m = study_plan(
      write_study("[base]\n\"train.max_steps\" = 5\n[axes]\n\"optim.lr\" = [1e-3, 2e-3]\n"),
      json());
  const json before = m;
  EXPECT_FALSE(
      study_plan_finals(&m, [](const std::string&) { return std::optional<double>(1.0); }));
  EXPECT_EQ(m, before);
}

TEST(StudyFinals, DefaultsAreFiveSeedsSelectedByOptimizer) {
  const json m = study_plan(write_study("[base]\n\"train.max_steps\" = 5\n[axes]\n\"optim.name\" = "
                                        "[\"adamw\", \"lion\"]\n\"optim.lr\" = [1e-3, "
                                        "2e-3]\n[finals]\n"),
                            json());
  EXPECT_EQ(m["finals"]["seeds"], json::array({1001, 1002, 1003, 1004, 1005}));
  EXPECT_EQ(m["finals"]["select"], json::array({"optim.name"}));
  EXPECT_TRUE(m["finals"]["wall_clock_seconds"].is_null());
}

TEST(StudyFinals, BadFinalsAreOneLineNamingTheKey) {
  const std::string axes =
      "[base]\n\"train.max_steps\" = 5\n[axes]\n\"optim.name\" = [\"adamw\"]\n\"train.seed\" = [1, "
      "2]\n"
      "\"optim.lr\" = [1e-3, 2e-3]\n[finals]\n";
  auto error = [&](const std::string& finals) {
    return error_of([&] { study_plan(write_study(axes + finals), json()); });
  };
  EXPECT_NE(error("seeds = [2, 7]").find("2 is a seed of the train.seed axis"), std::string::npos);
  EXPECT_NE(error("seeds = [7]").find("at least 2 fresh seeds"), std::string::npos);
  EXPECT_NE(error("seeds = [7, 7]").find("7 appears twice"), std::string::npos);
  EXPECT_NE(error("select = [\"optim.lr\"]").find("cannot make an arm"), std::string::npos);
  EXPECT_NE(error("select = [\"model.n_layer\"]").find("'model.n_layer' is no axis"),
            std::string::npos);
  EXPECT_NE(error("split = \"train\"").find("expected auto, val or test"), std::string::npos);
  EXPECT_NE(error("seedz = [1]").find("unknown key 'seedz'"), std::string::npos);
  EXPECT_NE(error("[finals.wall_clock]\nseconds = -1").find("wall_clock.seconds"),
            std::string::npos);
  EXPECT_NE(error("[finals.wall_clock]\nseconds = 5\nfrom = { \"train.max_tokens\" = 9 }")
                .find("is not one of finals.select"),
            std::string::npos);
}

// A wall-clock AdEMAMix final keeps the warmup its token-budget setting had (its run length in
// steps: 4096 tokens / (2 x 8 x 1 sequences of 64) = 4), since seconds give no length in steps.
TEST(StudyFinals, WallClockAdemamixKeepsItsWarmupInSteps) {
  json m = study_plan(write_study(R"(
[base]
"train.max_tokens" = 4096
"train.seq_len" = 64
"model.block_size" = 64
batch = "2x8x1"
[axes]
"optim.name" = ["ademamix"]
"optim.lr" = [1e-3, 2e-3]
[finals]
seeds = [5, 6]
[finals.wall_clock]
seconds = 2
)"),
                      json());
  ASSERT_TRUE(study_plan_finals(&m, [](const std::string&) { return std::optional<double>(1.0); }));
  int wall = 0;
  for (const json& r : m["runs"]) {
    if (!study_is_wall_clock(r)) continue;
    ++wall;
    EXPECT_EQ(r["overrides"]["optim.ademamix_warmup"], "4") << r["name"];
    EXPECT_EQ(r["world"], 2);
  }
  EXPECT_EQ(wall, 2);
}

}  // namespace
}  // namespace ledgerlm
