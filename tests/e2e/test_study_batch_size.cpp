// configs/studies/batch_size_smoke.toml as CI runs it: a batch-size study with the
// steps_to_target objective. Planned, its budgets and eval spacing are derived from each run's
// global batch; run, every sweep run records its steps (and tokens) to target_loss, which this
// test recomputes from the run's metrics.jsonl with its own reading of the formula; the finals
// train, per batch, the LR with the fewest mean steps to target. A target no run reaches is
// reported and the sweep not widened; finals reported on the test split keep their whole-split
// evaluations. About 5 s on 2 cores in all.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::read_file;
using testing::run_command;
using testing::write_file;

// Steps and tokens to TARGET from a metrics.jsonl, as the study file's documentation states it:
// the first eval (s1, l1) with l1 <= target; with an earlier eval (s0, l0),
// s = s0 + (s1 - s0) * (l0 - target) / (l0 - l1), else s1; +inf when never reached.
std::pair<double, double> to_target(const std::string& metrics, double target) {
  std::ifstream in(metrics);
  std::string line;
  bool have_prev = false;
  double s0 = 0, t0 = 0, l0 = 0;
  while (std::getline(in, line)) {
    const json r = json::parse(line);
    if (!r.contains("step") || !r.contains("val_loss")) continue;
    const double s1 = r["step"], t1 = r["tokens"], l1 = r["val_loss"];
    if (l1 <= target) {
      if (!have_prev) return {s1, t1};
      const double f = (l0 - target) / (l0 - l1);
      return {s0 + (s1 - s0) * f, t0 + (t1 - t0) * f};
    }
    have_prev = true;
    s0 = s1, t0 = t1, l0 = l1;
  }
  const double inf = std::numeric_limits<double>::infinity();
  return {inf, inf};
}

// A temporary directory with a prepared byte-level corpus in DIR/data, and the same with a test
// split in DIR/data_test ("" on failure).
std::string prepared_root() {
  const std::string root = testing::make_temp_dir("ledgerlm_study_bs_");
  if (root.empty()) return "";
  std::string corpus;
  for (int i = 0; corpus.size() < 40000; ++i)
    corpus += "in the beginning was the word, and the word was " + std::to_string(i % 31) + ".\n";
  if (!write_file(root + "/corpus.txt", corpus)) return "";
  const CommandResult prep = run_command(testing::ledgerlm_binary() + " prepare --input " + root +
                                         "/corpus.txt --out " + root + "/data --tokenizer bytes");
  const CommandResult prep_test =
      run_command(testing::ledgerlm_binary() + " prepare --input " + root + "/corpus.txt --out " +
                  root + "/data_test --tokenizer bytes --test-fraction 0.1");
  return prep.exit_code == 0 && prep_test.exit_code == 0 ? root : "";
}

// A study of one 5-point LR sweep at G = 4 for STEPS steps to TARGET, finals over every setting.
std::string sweep_study(const std::string& root, const std::string& data, double target,
                        int steps) {
  return "config = \"" + testing::source_dir() +
         "/configs/tiny_test.toml\"\nobjective = \"steps_to_target\"\ntarget_loss = " +
         std::to_string(target) + "\n[base]\n\"data.dir\" = \"" + root + "/" + data +
         "\"\n\"train.seq_len\" = 32\n\"train.micro_batch\" = 4\nbudget_steps = " +
         std::to_string(steps) +
         "\neval_tokens = 256\n[axes]\nlr = \"sweep\"\nlr_center = 1e-2\nlr_max_points = 7\n"
         "[finals]\nseeds = [1001, 1002]\nselect = []\n";
}

// The sweep study above (name.toml under ROOT) planned into ROOT/name and run with -j 2.
struct SweepRun {
  std::string dir;
  CommandResult plan, run;
};
SweepRun plan_and_run_sweep(const std::string& root, const std::string& name,
                            const std::string& data, double target, int steps) {
  SweepRun s;
  const std::string file = root + "/" + name + ".toml";
  s.dir = root + "/" + name;
  if (!write_file(file, sweep_study(root, data, target, steps))) {
    s.plan = {1, "cannot write " + file};
    return s;
  }
  const std::string study = testing::ledgerlm_binary() + " study ";
  s.plan = run_command(study + "plan " + file + " --out " + s.dir);
  if (s.plan.exit_code == 0) s.run = run_command(study + "run " + s.dir + " -j 2");
  return s;
}

TEST(StudyBatchSize, SmokeStudyScoresRunsByStepsToTarget) {
  const std::string root = prepared_root();
  ASSERT_FALSE(root.empty());
  std::string text = read_file(testing::source_dir() + "/configs/studies/batch_size_smoke.toml");
  const std::string data_line = "\"data.dir\" = \"data_out/kjv\"";
  ASSERT_NE(text.find(data_line), std::string::npos) << "the smoke study's data.dir changed";
  text.replace(text.find(data_line), data_line.size(), "\"data.dir\" = \"" + root + "/data\"");
  text.replace(text.find("../tiny_test.toml"), std::string("../tiny_test.toml").size(),
               testing::source_dir() + "/configs/tiny_test.toml");
  // This corpus is far easier than the file's (KJV): a target some LRs reach and some do not.
  const size_t target_at = text.find("\ntarget_loss = ");
  ASSERT_NE(target_at, std::string::npos) << "the smoke study no longer sets target_loss";
  text.replace(target_at + 1, text.find('\n', target_at + 1) - target_at - 1, "target_loss = 1.5");
  const std::string file = root + "/batch_size_smoke.toml", dir = root + "/study";
  ASSERT_TRUE(write_file(file, text));
  const std::string study = testing::ledgerlm_binary() + " study ";
  const CommandResult plan = run_command(study + "plan " + file + " --out " + dir);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("15 run(s)"), std::string::npos) << plan.output;

  // Derived at plan time: max_tokens = 8192 + 16 steps x G x 32, eval_interval = round(1024 /
  // (G x 32)) (8, 4, 2 at G = 4, 8, 16), and no step or time budget of the base config left.
  json manifest = json::parse(read_file(dir + "/manifest.json"));
  EXPECT_EQ(manifest["objective"], "steps_to_target");
  const double target = manifest["target_loss"];
  EXPECT_EQ(target, 1.5);
  const std::map<std::string, int> global = {{"1x2x2", 4}, {"1x4x2", 8}, {"1x8x2", 16}};
  for (const json& r : manifest["runs"]) {
    const int g = global.at(r["axes"]["batch"]);
    const json& ov = r["overrides"];
    EXPECT_EQ(ov["train.max_tokens"], std::to_string(8192 + 16 * g * 32)) << r["name"];
    EXPECT_EQ(ov["train.eval_interval"], std::to_string(32 / g)) << r["name"];
    EXPECT_EQ(ov["train.max_steps"], "0") << r["name"];
    EXPECT_EQ(ov["train.max_seconds"], "0") << r["name"];
  }

  const CommandResult run = run_command(study + "run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  manifest = json::parse(read_file(dir + "/manifest.json"));
  // The trainer ran with the derived budget: 8192 + 16 x 16 x 32 = 16384 tokens = 32 steps.
  const json s16 = json::parse(read_file(dir + "/runs/b1x8x2_lr0.01/summary.json"));
  EXPECT_EQ(s16["steps"], 32);
  EXPECT_NE(read_file(dir + "/runs/b1x8x2_lr0.01/config.toml").find("eval_interval = 2\n"),
            std::string::npos);

  // Every run's recorded score is the formula on its metrics.jsonl. The recorded and recomputed
  // figures come from the same doubles through the same arithmetic, but the test's expression is
  // its own: a relative 1e-12 allows for a compiler contracting it differently.
  std::map<std::string, std::map<std::string, std::vector<double>>> steps_of;  // arm, setting
  int never = 0, sweep_runs = 0;
  for (const json& r : manifest["runs"]) {
    const std::string name = r["name"], run_dir = dir + "/runs/" + name;
    const json e = json::parse(read_file(run_dir + "/study_eval.json"));
    const auto [steps, tokens] = to_target(run_dir + "/metrics.jsonl", target);
    ASSERT_TRUE(e.contains("steps_to_target")) << name << ": " << e.dump();
    EXPECT_EQ(e["target_loss"], target) << name;
    if (!std::isfinite(steps)) {
      EXPECT_TRUE(e["steps_to_target"].is_null() && e["tokens_to_target"].is_null()) << name;
      ++never;
    } else {
      const double got = e["steps_to_target"], got_tokens = e["tokens_to_target"];
      EXPECT_NEAR(got, steps, 1e-12 * steps) << name;
      EXPECT_NEAR(got_tokens, tokens, 1e-12 * tokens) << name;
      // Tokens to target are the steps times the tokens of a step (G x seq_len).
      const int g = global.at(r["axes"]["batch"]);
      EXPECT_NEAR(got_tokens, got * g * 32, 1e-9 * got_tokens) << name;
    }
    // The score comes from the in-run evals: no whole-split evaluation ran.
    EXPECT_FALSE(e.contains("full_val_loss")) << name;
    if (r.contains("phase")) continue;
    ++sweep_runs;
    // The arm is the batch's name part; the sweep has one seed, so a run is a setting.
    std::string arm = "b";
    arm.append(r["axes"]["batch"].get<std::string>());
    steps_of[arm][name].push_back(steps);
  }
  EXPECT_GE(sweep_runs, 15);
  EXPECT_GT(never, 0) << "the target should be out of reach of some LRs (a test of +inf)";

  // Finals: per batch, the setting with the fewest mean steps to target, with both fresh seeds.
  ASSERT_EQ(manifest["finals"]["arms"].size(), 3u) << manifest["finals"].dump();
  for (const auto& [arm, settings] : steps_of) {
    std::string best;
    double best_mean = std::numeric_limits<double>::infinity();
    for (const auto& [setting, v] : settings) {
      double sum = 0;
      for (double x : v) sum += x;
      if (sum / static_cast<double>(v.size()) < best_mean) {
        best_mean = sum / static_cast<double>(v.size());
        best = setting;
      }
    }
    const json& a = manifest["finals"]["arms"][arm];
    ASSERT_FALSE(best.empty()) << arm << ": no LR reached the target";
    EXPECT_EQ(a["from"], best) << arm;
    EXPECT_EQ(a["selection_steps_to_target"], best_mean) << arm;
    for (const char* seed : {"1001", "1002"}) {
      std::string final_run = "final_";
      final_run.append(arm).append("_seed").append(seed);
      const json s = json::parse(read_file(dir + "/runs/" + final_run + "/summary.json"));
      EXPECT_EQ(s["status"], "finished") << final_run;
    }
  }
  EXPECT_NE(run.output.find(std::to_string(sweep_runs + 6) + " run(s) finished, 0 failed"),
            std::string::npos)
      << run.output;
}

// A target no run reaches: every score is +inf (null in study_eval.json); the sweep is reported
// once and not widened (its best is at no edge), and no arm gets finals. About 1 s.
TEST(StudyBatchSize, UnreachedTargetIsReportedNotWidened) {
  const std::string root = prepared_root();
  ASSERT_FALSE(root.empty());
  const SweepRun sweep = plan_and_run_sweep(root, "unreached", "data", 0.001, 6);
  ASSERT_EQ(sweep.plan.exit_code, 0) << sweep.plan.output;
  const CommandResult& run = sweep.run;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string& dir = sweep.dir;
  const std::string line = "study: sweep *: no LR reached target_loss: nothing to widen from";
  const size_t at = run.output.find(line);
  EXPECT_NE(at, std::string::npos) << run.output;
  EXPECT_EQ(run.output.find(line, at + 1), std::string::npos) << "reported twice: " << run.output;
  EXPECT_NE(run.output.find("5 run(s) finished, 0 failed"), std::string::npos) << run.output;
  const json m = json::parse(read_file(dir + "/manifest.json"));
  ASSERT_EQ(m["runs"].size(), 5u);
  EXPECT_EQ(m["sweeps"]["*"]["low"], 0);
  EXPECT_EQ(m["sweeps"]["*"]["high"], 0);
  const json& arm = m["finals"]["arms"]["all"];
  EXPECT_TRUE(arm["from"].is_null()) << arm.dump();
  EXPECT_EQ(arm["note"], "no setting reached target_loss: no finals") << arm.dump();
  for (const json& r : m["runs"]) {
    const json e =
        json::parse(read_file(dir + "/runs/" + r["name"].get<std::string>() + "/study_eval.json"));
    EXPECT_TRUE(e["steps_to_target"].is_null() && e["tokens_to_target"].is_null()) << e.dump();
  }
}

// Finals reported on the test split (the data has one, split "auto") keep their whole-split
// evaluations (the test loss comes from nothing else) beside their steps to target; sweep runs
// have none. About 2 s.
TEST(StudyBatchSize, FinalsOnTheTestSplitAreStillEvaluated) {
  const std::string root = prepared_root();
  ASSERT_FALSE(root.empty());
  const SweepRun sweep = plan_and_run_sweep(root, "test_split", "data_test", 2.5, 40);
  ASSERT_EQ(sweep.plan.exit_code, 0) << sweep.plan.output;
  const CommandResult& run = sweep.run;
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const std::string& dir = sweep.dir;
  EXPECT_NE(run.output.find("7 run(s) finished, 0 failed"), std::string::npos) << run.output;
  const json m = json::parse(read_file(dir + "/manifest.json"));
  int finals = 0;
  for (const json& r : m["runs"]) {
    const std::string name = r["name"];
    const json e = json::parse(read_file(dir + "/runs/" + name + "/study_eval.json"));
    EXPECT_TRUE(e.contains("steps_to_target")) << name << ": " << e.dump();
    if (!r.contains("phase")) {
      EXPECT_FALSE(e.contains("full_val_loss")) << name << ": " << e.dump();
      continue;
    }
    ++finals;
    EXPECT_EQ(e["split"], "test") << name;
    EXPECT_TRUE(e["full_test_loss"].is_number() && e["full_val_loss"].is_number()) << e.dump();
  }
  EXPECT_EQ(finals, 2);
}

}  // namespace
}  // namespace ledgerlm
