// Study files expanded into manifests (train/cli/study_plan.h): run names from the axis values,
// per-optimizer grids over the axes, LR sweeps at factor 2 and their widening, the same manifest
// from the same file, the runs already planned kept when the file grows, and one clear error for
// bad input. study_sweep_edge decides where a sweep widens.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/study_test_support.h"
#include "tests/support/test_util.h"
#include "train/cli/study_plan.h"
#include "train/config/config_keys.h"

namespace ledgerlm {
namespace {

using json = nlohmann::json;
using testing::error_of;
using testing::write_study;

// The manifest of a study file of TEXT.
json plan_of(const std::string& text) {
  return study_plan(write_study(text), json());
}

// The error planning a study file of TEXT throws ("" when it plans).
std::string plan_error(const std::string& text) {
  return error_of([&] { plan_of(text); });
}

std::vector<std::string> names(const json& manifest) {
  std::vector<std::string> out;
  for (const json& r : manifest["runs"]) out.push_back(r["name"]);
  return out;
}

// Two optimizers x 2 seeds x 2 LRs of 5 steps, without a baseline.
const std::string kTwoOptimizerAxes = R"(
[base]
"train.max_steps" = 5
[axes]
"optim.name" = ["adamw", "lion"]
"train.seed" = [1, 2]
"optim.lr" = [3e-3, 0.01]
)";

const std::string kTwoOptimizers =
    "\nbaseline = \"adamw_lr0.003\"" + kTwoOptimizerAxes + R"("optim.weight_decay" = 0.1
[grid.lion]
"optim.lr" = [1e-4]
"optim.weight_decay" = [1.0, 3]
)";

TEST(StudyPlan, NamesOverridesAndGridsAreTheAxisValues) {
  const json m = plan_of(kTwoOptimizers);
  const std::vector<std::string> want = {"adamw_lr0.003_seed1",
                                         "adamw_lr0.003_seed2",
                                         "adamw_lr0.01_seed1",
                                         "adamw_lr0.01_seed2",
                                         "lion_lr1e-04_weight_decay1.0_seed1",
                                         "lion_lr1e-04_weight_decay1.0_seed2",
                                         "lion_lr1e-04_weight_decay3.0_seed1",
                                         "lion_lr1e-04_weight_decay3.0_seed2"};
  EXPECT_EQ(names(m), want);
  EXPECT_EQ(m["baseline"], "adamw_lr0.003");
  const json& first = m["runs"][0]["overrides"];
  EXPECT_EQ(first["train.max_steps"], "5");
  EXPECT_EQ(first["optim.weight_decay"], "0.1");  // a scalar in [axes]: fixed, not in the name
  EXPECT_EQ(first["optim.name"], "adamw");
  const json& lion = m["runs"][7]["overrides"];
  EXPECT_EQ(lion["optim.lr"], "1e-04");          // the shortest exact text of 1e-4
  EXPECT_EQ(lion["optim.weight_decay"], "3.0");  // 3 and 3.0 are one value
  EXPECT_EQ(m["runs"][7]["axes"]["train.seed"], "2");
}

// A float's canonical text writes a positive exponent as "e+06"; '+' is no run-name character
// and used to become '-', so 1e+06 was named lr1e-06, the name of 1e-06. The name now drops the
// '+' and the exponent's leading zeros; every name of a value written without "e+" is as before
// (published manifests name their runs so). Each name reads back to its exact value.
TEST(StudyNames, NumbersKeepTheirExponentSignAndReadBack) {
  RunConfig cfg;
  ConfigKey lr_key;
  for (const ConfigKey& k : config_keys(cfg))
    if (k.full() == "optim.lr") lr_key = k;
  const std::vector<std::pair<double, std::string>> cases = {
      {1e-06, "lr1e-06"},      {1e+06, "lr1e6"},
      {-1e+06, "lr-1e6"},      {-1e-06, "lr-1e-06"},
      {0.0, "lr0.0"},          {-2.5, "lr-2.5"},
      {1.5e+20, "lr1.5e20"},   {123456789, "lr123456789.0"},
      {1e+05, "lr1e5"},        {2.5e-300, "lr2.5e-300"},
      {1.7e+308, "lr1.7e308"}, {0.003, "lr0.003"},
      {1e-04, "lr1e-04"}};
  std::set<std::string> seen;
  for (const auto& [value, want] : cases) {
    cfg.optim.lr = value;
    const std::string name = study_name_part("optim.lr", config_value_text(lr_key), {"optim.lr"});
    EXPECT_EQ(name, want) << value;
    EXPECT_EQ(study_filesystem_safe(name), name) << "not a run name: " << name;
    EXPECT_TRUE(seen.insert(name).second) << "two values named " << name;
    EXPECT_EQ(std::strtod(name.c_str() + 2, nullptr), value) << name;
  }
  // Text that is no number is left as it is.
  EXPECT_EQ(study_number_name("e+06"), "e+06");
  EXPECT_EQ(study_number_name("adamw"), "adamw");
}

// Through a whole plan: 1e-6 and 1e6 on one axis are two runs with two names.
TEST(StudyPlan, LargeAndSmallLrAreTwoNames) {
  const json m = plan_of(
      "[base]\n\"train.max_steps\" = 5\n[axes]\n"
      "\"optim.lr\" = [1e-6, 1e6, 1e5]\n");
  EXPECT_EQ(names(m), (std::vector<std::string>{"lr1e-06", "lr1e6", "lr1e5"}));
}

TEST(StudyPlan, SameFileSameManifest) {
  const std::string path = write_study(kTwoOptimizers);
  EXPECT_EQ(study_plan(path, json()).dump(), study_plan(path, json()).dump());
  // Re-planning onto its own manifest changes nothing either.
  const json m = study_plan(path, json());
  EXPECT_EQ(study_plan(path, m).dump(), m.dump());
}

TEST(StudyPlan, ExtendedFileKeepsThePlannedRuns) {
  const json before = plan_of(kTwoOptimizers);
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

// Two runs of the batch axis: 1 x 16 x 1 and 2 x 4 x 2.
const char* kBatchAxis = R"(
[base]
"train.max_steps" = 5
[axes]
batch = ["1x16x1", "2x4x2"]
)";

TEST(StudyPlan, BatchAxisSetsWorldMicroAndAccum) {
  const json m = plan_of(kBatchAxis);
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

// A sweep widens per finals arm: the batch of a batch-size study has its own edge, so widening
// one batch's sweep adds a point there alone; a widening recorded under the optimizer's name (a
// manifest planned before arms scoped sweeps) still applies to each of its arms.
TEST(StudyPlan, SweepsAreScopedAndWidenedPerFinalsArm) {
  const std::string path = write_study(R"(
[base]
"train.max_steps" = 5
[axes]
"optim.name" = ["adamw"]
batch = ["1x2x1", "1x4x1"]
lr = "sweep"
lr_center = 1e-3
lr_points = 5
[finals]
select = ["optim.name", "batch"]
seeds = [11, 12]
)");
  json m = study_plan(path, json());
  ASSERT_EQ(m["runs"].size(), 10u);
  ASSERT_TRUE(m["sweeps"].contains("adamw_b1x2x1")) << m["sweeps"].dump();
  ASSERT_TRUE(m["sweeps"].contains("adamw_b1x4x1")) << m["sweeps"].dump();
  EXPECT_FALSE(m["sweeps"].contains("adamw"));
  for (const json& r : m["runs"]) {
    std::string scope = "adamw_b";
    scope.append(r["axes"]["batch"].get<std::string>());
    EXPECT_EQ(r["sweep"]["scope"], scope) << r.dump();
  }

  m["sweeps"]["adamw_b1x4x1"]["high"] = 1;  // the larger batch's best LR was at its top edge
  const json wider = study_plan(path, m);
  ASSERT_EQ(wider["runs"].size(), 11u);
  EXPECT_EQ(wider["runs"][10]["name"], "adamw_b1x4x1_lr0.008");
  EXPECT_EQ(wider["sweeps"]["adamw_b1x4x1"]["high"], 1);
  EXPECT_EQ(wider["sweeps"]["adamw_b1x2x1"]["high"], 0);

  json old = study_plan(path, json());
  old["sweeps"] = {{"adamw", old["sweeps"]["adamw_b1x2x1"]}};
  old["sweeps"]["adamw"]["low"] = 1;
  const json from_old = study_plan(path, old);
  ASSERT_EQ(from_old["runs"].size(), 12u);  // one lower point for each batch
  EXPECT_EQ(from_old["sweeps"]["adamw_b1x2x1"]["low"], 1);
  EXPECT_EQ(from_old["sweeps"]["adamw_b1x4x1"]["low"], 1);
}

TEST(StudyPlan, BadInputIsOneLineNamingIt) {
  EXPECT_NE(plan_error("[axes]\n\"optim.lrr\" = [1]\n").find("'optim.lrr' is no config key"),
            std::string::npos);
  EXPECT_NE(plan_error("[axes]\nlr = \"sweep\"\n").find("needs lr_center"), std::string::npos);
  EXPECT_NE(plan_error("[axes]\nlr = \"sweep\"\nlr_center = 1e-3\n"
                       "lr_points = 3\n")
                .find("lr_points: expected >= 5"),
            std::string::npos);
  EXPECT_NE(plan_error("[axes]\nbatch = [\"2x8\"]\n").find("expected WORLDxMICROxACCUM"),
            std::string::npos);
  EXPECT_NE(plan_error("[axes]\n\"optim.name\" = [\"sgd\"]\n[grid.lion]\n"
                       "lr = [1e-4]\n")
                .find("'lion' is not a value of the optim.name axis"),
            std::string::npos);
  EXPECT_NE(plan_error("axes = 3\nfoo = 1\n").find("unknown key 'foo'"), std::string::npos);
  EXPECT_NE(error_of([] { study_plan("/nonexistent/study.toml", json()); }).find("not found"),
            std::string::npos);
}

// Every study file shipped in configs/studies/ plans, and its baseline is one of its arms (a run
// name without its seed part), or with [finals] a value of its optim.name axis or one of its
// finals' arms (batch_size_smoke.toml's batches), so the report can compare against it.
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
        // An arm of the finals: the run's values of the select axes, as run names spell them.
        std::vector<std::string> keys;
        for (const auto& [k, v] : r["axes"].items()) keys.push_back(k);
        std::string arm;
        for (const json& key : m["finals"]["select"]) {
          const std::string value = r["axes"].contains(key) ? r["axes"][key] : r["overrides"][key];
          if (!arm.empty()) arm.push_back('_');
          arm.append(study_name_part(key, value, keys));
        }
        found |= arm == baseline || r["overrides"].value("optim.name", std::string()) == baseline;
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

// A baseline that names no arm used to show only in the report, after the study trained: it is
// refused when planned, in one line listing the arms. Without [finals] an arm is a setting (the
// run name without its seed part), so an optimizer's name alone is no arm; with [finals] it is.
TEST(StudyPlan, BaselineNamingNoArmIsRefusedWhenPlanned) {
  const std::string& axes = kTwoOptimizerAxes;
  const std::string no_arm = plan_error("baseline = \"adamw\"\n" + axes);
  EXPECT_NE(no_arm.find(": baseline 'adamw' names no arm of the study (a run name without its "
                        "seed part: adamw_lr0.003, adamw_lr0.01, lion_lr0.003, lion_lr0.01)"),
            std::string::npos)
      << no_arm;
  EXPECT_EQ(no_arm.find('\n'), std::string::npos) << no_arm;
  EXPECT_EQ(plan_of("baseline = \"lion_lr0.01\"\n" + axes)["baseline"], "lion_lr0.01");
  const std::string finals = axes + "[finals]\nseeds = [101, 102]\n";
  EXPECT_EQ(plan_of("baseline = \"adamw\"\n" + finals)["baseline"], "adamw");
  const std::string typo = plan_error("baseline = \"adam\"\n" + finals);
  EXPECT_NE(typo.find(": baseline 'adam' names no arm of the study (an optim.name value or a "
                      "finals arm: adamw, lion)"),
            std::string::npos)
      << typo;
  // No baseline: nothing to check (the report then makes no comparisons).
  EXPECT_TRUE(plan_of(axes)["baseline"].is_null());
}

// manifest.json's run names become paths (runs/NAME) and command-line values: a name that is
// empty, holds '..', a path separator or a control character, starts with '-', or appears twice
// is refused when the manifest is read, in one line naming the entry.
TEST(StudyManifest, RunNamesThatLeaveRunsAreRefusedOnRead) {
  const std::string dir = testing::make_temp_dir("ledgerlm_study_manifest_");
  auto read_with = [&](const std::vector<std::string>& names) {
    json runs = json::array();
    for (const std::string& n : names)
      runs.push_back(
          {{"name", n}, {"world", 1}, {"axes", json::object()}, {"overrides", json::object()}});
    EXPECT_TRUE(
        testing::write_file(dir + "/manifest.json", json{{"format", 1}, {"runs", runs}}.dump()));
    return error_of([&] { study_manifest_read(dir); });
  };
  const std::string where = dir + "/manifest.json: runs[";
  EXPECT_EQ(read_with({"ok", "../evil"}),
            where + "1]: run name '../evil' holds '..' (a run directory must stay inside runs/)");
  EXPECT_EQ(read_with({".."}),
            where + "0]: run name '..' holds '..' (a run directory must stay inside runs/)");
  EXPECT_EQ(read_with({"a/b"}),
            where + "0]: run name 'a/b' holds a path separator (expected one file name)");
  EXPECT_EQ(read_with({""}),
            where + "0]: empty run name (expected letters, digits, '.', '-', '_')");
  EXPECT_EQ(read_with({"a\nb"}), where +
                                     "0]: run name holds control character 10 (expected "
                                     "letters, digits, '.', '-', '_')");
  EXPECT_EQ(read_with({"-j"}), where +
                                   "0]: run name '-j' starts with '-' (it would read as an "
                                   "option of `ledgerlm train`)");
  EXPECT_EQ(read_with({"x", "x"}), where + "1]: run name 'x' appears twice");
  EXPECT_EQ(read_with({"adamw_lr0.003_seed1", "lion_lr1e-04_seed2"}), "");
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
  const std::string err = plan_error(
      "[base]\n\"train.max_steps\" = 5\n\"optim.schedule\" = \"cosine\"\n"
      "[axes]\n\"optim.name\" = [\"adamw\", \"adamw_schedulefree\"]\n");
  EXPECT_NE(err.find("run adamw_schedulefree: optim.schedule = cosine"), std::string::npos) << err;
  EXPECT_NE(plan_error("[axes]\n\"optim.lr\" = [1e-3]\n").find("set a budget"), std::string::npos);
}

// lr_rule scales optim.lr from lr_base_batch sequences to the run's global batch (world x micro x
// accum); warmup_fraction sets the warmup to that fraction of the run's steps. Neither reaches the
// trainer as a key; the manifest entry records the rule and its base G.
TEST(StudyPlan, DerivedLrRuleAndWarmupFollowTheGlobalBatch) {
  const json m = plan_of(R"(
[base]
"train.seq_len" = 64
"train.max_tokens" = 65536
"optim.lr" = 1e-3
lr_base_batch = 8
warmup_fraction = 0.1
[axes]
batch = ["1x8x1", "2x16x2"]
lr_rule = ["fixed", "linear", "sqrt"]
)");
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
    // The entry keeps the rule and its base G for the report's LR rules section.
    const json& entry = by_name.at(std::string("b1x8x1_lr-") + rule);
    EXPECT_EQ(entry["lr_rule"], rule);
    EXPECT_EQ(entry["lr_base_batch"], 8);
  }
  // G = 2 x 16 x 2 = 64 = 8 x the base: linear x8, sqrt x sqrt(8); 16 steps, warmup 1.6 -> 2.
  const json& lin = by_name.at("b2x16x2_lr-linear");
  EXPECT_EQ(lin["world"], 2);
  EXPECT_EQ(lin["overrides"]["optim.lr"], "0.008");
  EXPECT_EQ(lin["overrides"]["optim.warmup_steps"], "2");
  EXPECT_NEAR(std::stod(by_name.at("b2x16x2_lr-sqrt")["overrides"]["optim.lr"].get<std::string>()),
              1e-3 * std::sqrt(8.0), 1e-15);
  EXPECT_EQ(by_name.at("b2x16x2_lr-fixed")["overrides"]["optim.lr"], "0.001");

  EXPECT_NE(plan_error("[base]\n\"optim.lr\" = 1e-3\n[axes]\nlr_rule = [\"cubic\"]\n")
                .find("expected fixed, linear or sqrt"),
            std::string::npos);
  EXPECT_NE(plan_error("[base]\n\"optim.lr\" = 1e-3\nlr_base_batch = 8\n[axes]\n"
                       "lr_rule = [\"linear\"]\n")
                .find("needs the global batch"),
            std::string::npos);
  EXPECT_NE(plan_error("[base]\n\"optim.lr\" = 1e-3\n\"train.micro_batch\" = 8\n"
                       "[axes]\nlr_rule = [\"linear\"]\n")
                .find("needs lr_base_batch"),
            std::string::npos);
  EXPECT_NE(plan_error("[base]\nwarmup_fraction = 1.5\n").find("in [0, 1)"), std::string::npos);
}

// beta2_half_life sets optim.beta2 = 0.5^(G x seq_len / H): a gradient's weight in the second
// moment halves every H tokens at every G alike; 0 leaves optim.beta2 as set.
TEST(StudyPlan, Beta2HalfLifeHoldsTheSecondMomentsMemoryInTokensAcrossBatches) {
  const json m = plan_of(R"(
[base]
"train.seq_len" = 64
"train.max_tokens" = 65536
[axes]
batch = ["1x4x1", "1x32x2"]
beta2_half_life = [0, 16384]
)");
  std::map<std::string, json> by_name;
  for (const json& r : m["runs"]) by_name[r["name"]] = r;
  ASSERT_EQ(by_name.size(), 4u);
  // G = 4: 256 tokens a step, 0.5^(256 / 16384) = 0.5^(1/64); G = 64: 4096 tokens, 0.5^(1/4).
  const json& small = by_name.at("b1x4x1_b2hl16384")["overrides"];
  const json& large = by_name.at("b1x32x2_b2hl16384")["overrides"];
  EXPECT_NEAR(std::stod(small["optim.beta2"].get<std::string>()), std::pow(0.5, 1.0 / 64), 1e-15);
  EXPECT_NEAR(std::stod(large["optim.beta2"].get<std::string>()), std::pow(0.5, 0.25), 1e-15);
  EXPECT_FALSE(small.contains("beta2_half_life"));
  EXPECT_FALSE(by_name.at("b1x4x1_b2hl0")["overrides"].contains("optim.beta2"));
  EXPECT_FALSE(by_name.at("b1x4x1_b2hl0")["overrides"].contains("beta2_half_life"));

  EXPECT_NE(plan_error("[base]\n\"train.seq_len\" = 64\n\"train.micro_batch\" = 4\n"
                       "\"optim.beta2\" = 0.99\nbeta2_half_life = 4096\n")
                .find("sets optim.beta2: drop it"),
            std::string::npos);
  EXPECT_NE(plan_error("[base]\nbeta2_half_life = 0.5\n").find("expected an integer >= 0 (tokens)"),
            std::string::npos);
}

// The Slurm jobs a manifest records (`study run --slurm`) stay when the study is planned again
// (by hand, or by the widening of a sweep): they say which runs are queued.
TEST(StudyPlan, PlanningAgainKeepsTheSlurmJobs) {
  json m = plan_of(kTwoOptimizers);
  m["slurm"] = {{"jobs", {{{"job", "4711"}, {"runs", {"adamw_lr0.003_seed1"}}}}}};
  EXPECT_EQ(study_plan(write_study(kTwoOptimizers), m)["slurm"], m["slurm"]);
}

// --ranks-per-run N: a run's sequences per micro-batch step (world x micro-batch) shared out over
// N ranks, its accumulation and so its global batch kept; the micro-batch comes from the run's
// overrides or, when the plan set none, from the base config (defaults otherwise).
TEST(StudyPlan, SpreadRanksKeepsTheGlobalBatch) {
  const json m = plan_of(kBatchAxis);
  ASSERT_EQ(m["runs"].size(), 2u);
  const json one = study_spread_ranks(m, m["runs"][0], 4);
  EXPECT_EQ(one["world"], 4);
  EXPECT_EQ(one["overrides"]["train.micro_batch"], "4");
  EXPECT_EQ(one["overrides"]["train.accum"], "1");
  EXPECT_EQ(one["name"], m["runs"][0]["name"]);
  const json two = study_spread_ranks(m, m["runs"][1], 1);  // 2 x 4 x 2 on one rank: 1 x 8 x 2
  EXPECT_EQ(two["world"], 1);
  EXPECT_EQ(two["overrides"]["train.micro_batch"], "8");
  EXPECT_EQ(two["overrides"]["train.accum"], "2");
  EXPECT_EQ(study_spread_ranks(m, m["runs"][1], 0), m["runs"][1]);  // 0: as planned
  // No batch in the plan: the micro-batch is the trainer's default, 8.
  const json plain = plan_of("[base]\n\"train.max_steps\" = 5\n[axes]\n\"train.seed\" = [1]\n");
  EXPECT_EQ(study_spread_ranks(plain, plain["runs"][0], 2)["overrides"]["train.micro_batch"], "4");
  const std::string err =
      error_of([&] { study_spread_ranks(m, m["runs"][1], 3); });  // 2 x 4 = 8 sequences
  EXPECT_NE(err.find("--ranks-per-run 3: run b2x4x2: its 8 sequences per micro-batch step (world "
                     "2 x micro-batch 4) cannot be shared by 3 ranks"),
            std::string::npos)
      << err;
}

// budget_tokens + budget_steps x (G x seq_len) becomes the run's train.max_tokens (no step or time
// budget left from the base config), before warmup_fraction reads the run's steps from it;
// eval_tokens spaces the evals in tokens: eval_interval = max(1, round(X / (G x seq_len))).
TEST(StudyPlan, DerivedBudgetAndEvalSpacingFollowTheGlobalBatch) {
  const json m = plan_of(R"(
[base]
"train.seq_len" = 32
budget_tokens = 8192
budget_steps = 16
eval_tokens = 1000
warmup_fraction = 0.1
[axes]
batch = ["1x2x2", "1x8x2", "2x16x1"]
)");
  std::map<std::string, json> by_name;
  for (const json& r : m["runs"]) by_name[r["name"]] = r["overrides"];
  ASSERT_EQ(by_name.size(), 3u);
  // G = 4, 128 tokens a step: 8192 + 16 x 128 = 10240 tokens = 80 steps, warmup 8; evals every
  // round(1000 / 128) = round(7.8) = 8 steps.
  const json& g4 = by_name.at("b1x2x2");
  EXPECT_EQ(g4["train.max_tokens"], "10240");
  EXPECT_EQ(g4["train.max_steps"], "0");
  EXPECT_EQ(g4["train.max_seconds"], "0");
  EXPECT_EQ(g4["optim.warmup_steps"], "8");
  EXPECT_EQ(g4["train.eval_interval"], "8");
  // G = 16, 512 a step: 16384 tokens = 32 steps, warmup round(3.2) = 3, evals round(1.95) = 2.
  const json& g16 = by_name.at("b1x8x2");
  EXPECT_EQ(g16["train.max_tokens"], "16384");
  EXPECT_EQ(g16["optim.warmup_steps"], "3");
  EXPECT_EQ(g16["train.eval_interval"], "2");
  // G = 32 (world 2), 1024 a step: 8192 + 16384 = 24576 tokens; 1000 tokens < one step: every
  // step.
  EXPECT_EQ(by_name.at("b2x16x1")["train.max_tokens"], "24576");
  EXPECT_EQ(by_name.at("b2x16x1")["train.eval_interval"], "1");
  for (const auto& [name, ov] : by_name)
    EXPECT_FALSE(ov.contains("budget_tokens") || ov.contains("budget_steps") ||
                 ov.contains("eval_tokens"))
        << name;

  // Either alone; as axes they name their runs.
  const json axes = plan_of(R"(
[base]
"train.seq_len" = 32
"train.micro_batch" = 4
[axes]
budget_steps = [10, 20]
eval_tokens = [256, 512]
)");
  ASSERT_EQ(axes["runs"].size(), 4u);
  EXPECT_EQ(axes["runs"][0]["name"], "steps10_evaltok256");
  EXPECT_EQ(axes["runs"][0]["overrides"]["train.max_tokens"], "1280");
  EXPECT_EQ(axes["runs"][0]["overrides"]["train.eval_interval"], "2");
  EXPECT_EQ(axes["runs"][3]["overrides"]["train.max_tokens"], "2560");
  EXPECT_EQ(axes["runs"][3]["overrides"]["train.eval_interval"], "4");

  const std::string head = "[base]\n\"train.seq_len\" = 32\n\"train.micro_batch\" = 4\n";
  EXPECT_NE(plan_error(head + "budget_tokens = 1000\n\"train.max_steps\" = 5\n")
                .find("budget_tokens sets the run's budget: drop train.max_steps"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "budget_steps = 10\n\"train.max_tokens\" = 5\n")
                .find("drop train.max_tokens"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "budget_steps = 0\nbudget_tokens = 0\n")
                .find("expected at least one of them > 0"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "budget_steps = 1.5\n")
                .find("budget_steps: '1.5': expected an integer >= 0"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "eval_tokens = 0\n").find("expected an integer >= 1"),
            std::string::npos);
  EXPECT_NE(plan_error(head + "eval_tokens = 64\n\"train.eval_interval\" = 3\n")
                .find("eval_tokens sets train.eval_interval"),
            std::string::npos);
  EXPECT_NE(plan_error("[base]\n\"train.micro_batch\" = 4\nbudget_steps = 10\n")
                .find("needs train.seq_len"),
            std::string::npos);
}

// objective and target_loss: written to the manifest's top level, checked, and fixed for a study
// directory (its sweeps and finals were chosen by them).
TEST(StudyPlan, ObjectiveAndTargetLossAreTheManifestsAndFixed) {
  const std::string body = "[base]\n\"train.max_steps\" = 5\n[axes]\n\"train.seed\" = [1, 2]\n";
  const json plain = plan_of(body);
  EXPECT_EQ(plain["objective"], "val_loss");
  EXPECT_TRUE(plain["target_loss"].is_null());
  const std::string steps = "objective = \"steps_to_target\"\ntarget_loss = 2.5\n";
  const json m = plan_of(steps + body);
  EXPECT_EQ(m["objective"], "steps_to_target");
  EXPECT_EQ(m["target_loss"], 2.5);
  // The same objective again is a re-plan; another target or objective is refused.
  const json again = study_plan(write_study(steps + body), m);
  EXPECT_EQ(again["runs"], m["runs"]);
  EXPECT_EQ(again["target_loss"], 2.5);
  EXPECT_NE(error_of([&] {
              study_plan(write_study("objective = \"steps_to_target\"\ntarget_loss = 3\n" + body),
                         m);
            })
                .find("objective \"steps_to_target\" target_loss 3.0 differ from the study "
                      "directory's (\"steps_to_target\", 2.5)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { study_plan(write_study(body), m); }).find("plan into a new directory"),
            std::string::npos);
  EXPECT_NE(plan_error("objective = \"steps_to_target\"\n" + body).find("needs target_loss"),
            std::string::npos);
  EXPECT_NE(plan_error("objective = \"steps_to_target\"\ntarget_loss = 0\n" + body)
                .find("target_loss: expected a number > 0"),
            std::string::npos);
  EXPECT_NE(plan_error("objective = \"fastest\"\n" + body)
                .find("objective 'fastest': expected val_loss or steps_to_target"),
            std::string::npos);
  EXPECT_NE(plan_error("target_loss = 2\n" + body)
                .find("target_loss belongs to objective = \"steps_to_target\""),
            std::string::npos);
}

// A [grid.OPT] may override the batch axis (LAMB only at the largest G), and an LR sweep under
// lr_rule scales each of its points by the rule, so the sweep's centre follows G.
TEST(StudyPlan, GridOverridesTheBatchAxisAndSweepPointsFollowTheLrRule) {
  const json m = plan_of(R"(
[base]
"train.seq_len" = 32
"train.max_tokens" = 8192
lr_base_batch = 4
lr_rule = "sqrt"
[axes]
"optim.name" = ["adamw", "lamb"]
batch = ["1x2x2", "1x8x2"]
lr = "sweep"
lr_center = 1e-2
[grid.lamb]
batch = ["1x8x2"]
)");
  std::map<std::string, json> by_name;
  for (const json& r : m["runs"]) by_name[r["name"]] = r;
  ASSERT_EQ(by_name.size(), 15u);  // adamw: 2 batches x 5 LRs; lamb: 1 batch x 5 LRs
  for (const auto& [name, r] : by_name)
    if (r["overrides"]["optim.name"] == "lamb") {
      EXPECT_EQ(r["axes"]["batch"], "1x8x2") << name;
    }
  // G = 4 is the base batch: the sweep's own LRs. G = 16: x sqrt(4) = x 2 at every point.
  EXPECT_EQ(by_name.at("adamw_b1x2x2_lr0.0025")["overrides"]["optim.lr"], "0.0025");
  EXPECT_EQ(by_name.at("adamw_b1x2x2_lr0.04")["overrides"]["optim.lr"], "0.04");
  EXPECT_EQ(by_name.at("adamw_b1x8x2_lr0.0025")["overrides"]["optim.lr"], "0.005");
  EXPECT_EQ(by_name.at("adamw_b1x8x2_lr0.01")["overrides"]["optim.lr"], "0.02");
  EXPECT_EQ(by_name.at("lamb_b1x8x2_lr0.04")["overrides"]["optim.lr"], "0.08");
  EXPECT_EQ(by_name.at("lamb_b1x8x2_lr0.04")["sweep"]["exponent"], 2);
  EXPECT_FALSE(by_name.count("lamb_b1x2x2_lr0.01"));
}

}  // namespace
}  // namespace ledgerlm
