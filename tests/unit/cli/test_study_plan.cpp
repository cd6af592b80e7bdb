// Study files expanded into manifests (train/cli/study_plan.h): run names from the axis values,
// per-optimizer grids over the axes, LR sweeps at factor 2 and their widening, the same manifest
// from the same file, the runs already planned kept when the file grows, and one clear error for
// bad input. study_sweep_edge decides where a sweep widens.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"
#include "train/cli/study_plan.h"

namespace ledgerlm {
namespace {

using json = nlohmann::json;
using testing::error_of;

std::string write_study(const std::string& text) {
  static int counter = 0;
  static const std::string dir = testing::make_temp_dir("ledgerlm_study_plan_");
  const std::string path = dir + "/study" + std::to_string(counter++) + ".toml";
  EXPECT_TRUE(testing::write_file(path, text));
  return path;
}

std::vector<std::string> names(const json& manifest) {
  std::vector<std::string> out;
  for (const json& r : manifest["runs"]) out.push_back(r["name"]);
  return out;
}

const char* kTwoOptimizers = R"(
baseline = "adamw"
[base]
"train.max_steps" = 5
[axes]
"optim.name" = ["adamw", "lion"]
"train.seed" = [1, 2]
"optim.lr" = [3e-3, 0.01]
"optim.weight_decay" = 0.1
[grid.lion]
"optim.lr" = [1e-4]
"optim.weight_decay" = [1.0, 3]
)";

TEST(StudyPlan, NamesOverridesAndGridsAreTheAxisValues) {
  const json m = study_plan(write_study(kTwoOptimizers), json());
  const std::vector<std::string> want = {"adamw_lr0.003_seed1",
                                         "adamw_lr0.003_seed2",
                                         "adamw_lr0.01_seed1",
                                         "adamw_lr0.01_seed2",
                                         "lion_lr1e-04_weight_decay1.0_seed1",
                                         "lion_lr1e-04_weight_decay1.0_seed2",
                                         "lion_lr1e-04_weight_decay3.0_seed1",
                                         "lion_lr1e-04_weight_decay3.0_seed2"};
  EXPECT_EQ(names(m), want);
  EXPECT_EQ(m["baseline"], "adamw");
  const json& first = m["runs"][0]["overrides"];
  EXPECT_EQ(first["train.max_steps"], "5");
  EXPECT_EQ(first["optim.weight_decay"], "0.1");  // a scalar in [axes]: fixed, not in the name
  EXPECT_EQ(first["optim.name"], "adamw");
  const json& lion = m["runs"][7]["overrides"];
  EXPECT_EQ(lion["optim.lr"], "1e-04");          // the shortest exact text of 1e-4
  EXPECT_EQ(lion["optim.weight_decay"], "3.0");  // 3 and 3.0 are one value
  EXPECT_EQ(m["runs"][7]["axes"]["train.seed"], "2");
}

TEST(StudyPlan, SameFileSameManifest) {
  const std::string path = write_study(kTwoOptimizers);
  EXPECT_EQ(study_plan(path, json()).dump(), study_plan(path, json()).dump());
  // Re-planning onto its own manifest changes nothing either.
  const json m = study_plan(path, json());
  EXPECT_EQ(study_plan(path, m).dump(), m.dump());
}

TEST(StudyPlan, ExtendedFileKeepsThePlannedRuns) {
  const json before = study_plan(write_study(kTwoOptimizers), json());
  std::string grown = kTwoOptimizers;
  grown.replace(grown.find("[1, 2]"), 6, "[1, 2, 3]");
  const json after = study_plan(write_study(grown), before);
  ASSERT_EQ(after["runs"].size(), 12u);
  for (size_t i = 0; i < before["runs"].size(); ++i)
    EXPECT_EQ(after["runs"][i], before["runs"][i]) << "run " << i << " moved or changed";
  EXPECT_EQ(after["runs"][8]["name"], "adamw_lr0.003_seed3");
  // A run whose settings changed under the same name is refused.
  std::string changed = kTwoOptimizers;
  changed.replace(changed.find("= 5"), 3, "= 6");
  EXPECT_NE(error_of([&] {
              study_plan(write_study(changed), before);
            }).find("run 'adamw_lr0.003_seed1' is planned with other settings"),
            std::string::npos);
}

TEST(StudyPlan, BatchAxisSetsWorldMicroAndAccum) {
  const json m = study_plan(write_study(R"(
[base]
"train.max_steps" = 5
[axes]
batch = ["1x16x1", "2x4x2"]
)"),
                            json());
  EXPECT_EQ(names(m), (std::vector<std::string>{"b1x16x1", "b2x4x2"}));
  EXPECT_EQ(m["runs"][1]["world"], 2);
  EXPECT_EQ(m["runs"][1]["overrides"]["train.micro_batch"], "4");
  EXPECT_EQ(m["runs"][1]["overrides"]["train.accum"], "2");
  EXPECT_FALSE(m["runs"][1]["overrides"].contains("batch"));
}

TEST(StudyPlan, SweepIsFactorTwoAroundTheCentreAndWidensFromThePreviousManifest) {
  const std::string path = write_study(R"(
[base]
"train.max_steps" = 5
[axes]
"optim.name" = ["adamw"]
lr = "sweep"
lr_center = 1e-3
lr_points = 5
)");
  json m = study_plan(path, json());
  EXPECT_EQ(names(m), (std::vector<std::string>{"adamw_lr0.00025", "adamw_lr5e-04", "adamw_lr0.001",
                                                "adamw_lr0.002", "adamw_lr0.004"}));
  EXPECT_EQ(m["runs"][0]["sweep"]["exponent"], -2);
  EXPECT_EQ(m["sweeps"]["adamw"]["max_points"], 9);  // lr_points + 4 by default
  m["sweeps"]["adamw"]["high"] = 1;                  // what `study run` records at the top edge
  const json wider = study_plan(path, m);
  ASSERT_EQ(wider["runs"].size(), 6u);
  EXPECT_EQ(wider["runs"][5]["name"], "adamw_lr0.008");
  EXPECT_EQ(wider["runs"][5]["sweep"]["exponent"], 3);
}

TEST(StudyPlan, BadInputIsOneLineNamingIt) {
  EXPECT_NE(error_of([] {
              study_plan(write_study("[axes]\n\"optim.lrr\" = [1]\n"), json());
            }).find("'optim.lrr' is no config key"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[axes]\nlr = \"sweep\"\n"), json());
            }).find("needs lr_center"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[axes]\nlr = \"sweep\"\nlr_center = 1e-3\n"
                                     "lr_points = 3\n"),
                         json());
            }).find("lr_points: expected >= 5"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[axes]\nbatch = [\"2x8\"]\n"), json());
            }).find("expected WORLDxMICROxACCUM"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[axes]\n\"optim.name\" = [\"sgd\"]\n[grid.lion]\n"
                                     "lr = [1e-4]\n"),
                         json());
            }).find("'lion' is not a value of the optim.name axis"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("axes = 3\nfoo = 1\n"), json());
            }).find("unknown key 'foo'"),
            std::string::npos);
  EXPECT_NE(error_of([] { study_plan("/nonexistent/study.toml", json()); }).find("not found"),
            std::string::npos);
}

// Every study file shipped in configs/studies/ plans, and its baseline is one of its arms (a run
// name without its seed part), or with [finals] a value of its optim.name axis, so the report can
// compare against it.
TEST(StudyPlan, ShippedStudiesPlanAndNameAnArmAsBaseline) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::source_dir() + "/configs/studies")) {
    if (entry.path().extension() != ".toml") continue;
    ++files;
    const json m = study_plan(entry.path().string(), json());
    ASSERT_FALSE(m["runs"].empty()) << entry.path();
    const std::string baseline = m["baseline"];
    bool found = false;
    for (const json& r : m["runs"]) {
      if (m.contains("finals")) {
        found |= r["overrides"].value("optim.name", std::string()) == baseline;
        continue;
      }
      const std::string name = r["name"];
      const std::string seed = "_seed" + r["axes"].value("train.seed", std::string("?"));
      found |= name.size() > seed.size() &&
               name.compare(name.size() - seed.size(), seed.size(), seed) == 0 &&
               name.substr(0, name.size() - seed.size()) == baseline;
    }
    EXPECT_TRUE(found) << entry.path() << ": baseline '" << baseline << "' is no arm";
  }
  EXPECT_GE(files, 3);
}

TEST(StudySweepEdge, BestAtAnEdgeWidensThatEdge) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(study_sweep_edge({{-2, 3.0}, {-1, 3.1}, {0, 3.2}, {1, 3.3}, {2, 3.4}}), -1);
  EXPECT_EQ(study_sweep_edge({{-2, 3.4}, {-1, 3.3}, {0, 3.2}, {1, 3.1}, {2, 3.0}}), 1);
  EXPECT_EQ(study_sweep_edge({{-2, 3.4}, {-1, 3.3}, {0, 3.0}, {1, 3.1}, {2, 3.2}}), 0);
  // A diverged top LR (non-finite) never wins: the best finite point is inside.
  EXPECT_EQ(study_sweep_edge({{-2, 3.4}, {-1, 3.3}, {0, 3.2}, {1, 3.1}, {2, nan}}), 0);
  EXPECT_EQ(study_sweep_edge({{-2, 3.4}, {-1, 3.3}, {0, 3.2}, {1, 3.1}, {2, inf}}), 0);
  EXPECT_EQ(study_sweep_edge({{0, 3.0}, {1, 3.1}}), 0);  // too few points for an edge
}

// A run whose config the trainer would refuse is one line at plan time, naming the run.
TEST(StudyPlan, RunTheTrainerWouldRefuseIsRefusedAtPlanTime) {
  const std::string err = error_of([] {
    study_plan(write_study("[base]\n\"train.max_steps\" = 5\n\"optim.schedule\" = \"cosine\"\n"
                           "[axes]\n\"optim.name\" = [\"adamw\", \"adamw_schedulefree\"]\n"),
               json());
  });
  EXPECT_NE(err.find("run adamw_schedulefree: optim.schedule = cosine"), std::string::npos) << err;
  EXPECT_NE(error_of([] {
              study_plan(write_study("[axes]\n\"optim.lr\" = [1e-3]\n"), json());
            }).find("set a budget"),
            std::string::npos);
}

// lr_rule scales optim.lr from lr_base_batch sequences to the run's global batch (world x micro x
// accum); warmup_fraction sets the warmup to that fraction of the run's steps. Neither reaches the
// trainer as a key.
TEST(StudyPlan, DerivedLrRuleAndWarmupFollowTheGlobalBatch) {
  const json m = study_plan(write_study(R"(
[base]
"train.seq_len" = 64
"train.max_tokens" = 65536
"optim.lr" = 1e-3
lr_base_batch = 8
warmup_fraction = 0.1
[axes]
batch = ["1x8x1", "2x16x2"]
lr_rule = ["fixed", "linear", "sqrt"]
)"),
                            json());
  std::map<std::string, json> by_name;
  for (const json& r : m["runs"]) by_name[r["name"]] = r;
  ASSERT_EQ(by_name.size(), 6u);
  // G = 8: every rule gives the base LR; 65536 / (8 x 64) = 128 steps, 10% = 12.8 -> 13.
  for (const char* rule : {"fixed", "linear", "sqrt"}) {
    const json& ov = by_name.at(std::string("b1x8x1_lr-") + rule)["overrides"];
    EXPECT_EQ(ov["optim.lr"], "0.001") << rule;
    EXPECT_EQ(ov["optim.warmup_steps"], "13") << rule;
    EXPECT_FALSE(ov.contains("lr_rule") || ov.contains("warmup_fraction") ||
                 ov.contains("lr_base_batch"));
  }
  // G = 2 x 16 x 2 = 64 = 8 x the base: linear x8, sqrt x sqrt(8); 16 steps, warmup 1.6 -> 2.
  const json& lin = by_name.at("b2x16x2_lr-linear");
  EXPECT_EQ(lin["world"], 2);
  EXPECT_EQ(lin["overrides"]["optim.lr"], "0.008");
  EXPECT_EQ(lin["overrides"]["optim.warmup_steps"], "2");
  EXPECT_NEAR(std::stod(by_name.at("b2x16x2_lr-sqrt")["overrides"]["optim.lr"].get<std::string>()),
              1e-3 * std::sqrt(8.0), 1e-15);
  EXPECT_EQ(by_name.at("b2x16x2_lr-fixed")["overrides"]["optim.lr"], "0.001");

  EXPECT_NE(error_of([] {
              study_plan(
                  write_study("[base]\n\"optim.lr\" = 1e-3\n[axes]\nlr_rule = [\"cubic\"]\n"),
                  json());
            }).find("expected fixed, linear or sqrt"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[base]\n\"optim.lr\" = 1e-3\nlr_base_batch = 8\n[axes]\n"
                                     "lr_rule = [\"linear\"]\n"),
                         json());
            }).find("needs the global batch"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[base]\n\"optim.lr\" = 1e-3\n\"train.micro_batch\" = 8\n"
                                     "[axes]\nlr_rule = [\"linear\"]\n"),
                         json());
            }).find("needs lr_base_batch"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              study_plan(write_study("[base]\nwarmup_fraction = 1.5\n"), json());
            }).find("in [0, 1)"),
            std::string::npos);
}

}  // namespace
}  // namespace ledgerlm
