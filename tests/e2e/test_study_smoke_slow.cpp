// The smoke studies of configs/studies end to end, as CI runs them: optimizers_smoke.toml
// planned, run (sweep, finals on the test split, wall-clock finals) and reported, and `compare
// --tsv` on two of its runs; global_batch_smoke.toml's LR rules; optimizers_modern_smoke.toml's
// budget ladder at two widths and its data-equivalent speedup; bcrit_bigram_smoke.toml's critical
// batch per arm past the bigram. About 50 s on 2 cores. In a file of their own (label slow)
// because they are mostly training: the sanitizer pass, ~8x slower, leaves them out, and the
// study runner's code they share with test_study.cpp runs there through that file's tests.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/study_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using namespace testing::study_test_names;

class StudySmoke : public testing::StudyDataSuite<StudySmoke> {
 public:
  static constexpr const char* kPrefix = "ledgerlm_study_smoke_";

 protected:
  static CommandResult study(const std::string& args) {
    return run_command(testing::ledgerlm_binary() + " study " + args);
  }
  // configs/studies/NAME.toml written to root_ with its data.dir set to DATA and its base config
  // (BASE, relative to configs/studies) to the source tree's: the file's path, or "" when the
  // study no longer reads as this expects (the test then fails saying so).
  static std::string smoke_study_file(const std::string& name, const std::string& base,
                                      const std::string& data) {
    std::string text = read_file(testing::source_dir() + "/configs/studies/" + name + ".toml");
    const std::string data_line = "\"data.dir\" = \"data_out/kjv\"", config = "../" + base;
    const size_t at = text.find(data_line), conf = text.find(config);
    if (at == std::string::npos || conf == std::string::npos) return "";
    text.replace(at, data_line.size(), "\"data.dir\" = \"" + data + "\"");
    text.replace(text.find(config), config.size(), testing::source_dir() + "/configs/" + base);
    const std::string file = root_ + "/" + name + ".toml";
    return write_file(file, text) ? file : "";
  }
};

// configs/studies/optimizers_smoke.toml as CI runs it: on this test's corpus with a test split
// (its data.dir line replaced), planned, run (the sweep, then the finals with three fresh seeds
// reported on the test split, then the wall-clock finals alone), reported. About 10 s.
TEST_F(StudySmoke, OptimizersSmokeStudyRunsAndReports) {
  const std::string data = root_ + "/data_with_test";
  const CommandResult prep =
      run_command(testing::ledgerlm_binary() + " prepare --input " + root_ + "/corpus.txt --out " +
                  data + " --tokenizer bytes --test-fraction 0.1");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string file = smoke_study_file("optimizers_smoke", "tiny_test.toml", data);
  ASSERT_FALSE(file.empty()) << "the smoke study no longer sets data.dir and config as expected";
  const std::string dir = root_ + "/smoke";
  const CommandResult plan = study("plan " + file + " --out " + dir);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("12 run(s)"), std::string::npos) << plan.output;
  const CommandResult run = study("run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // 12 sweep runs, 3 optimizers x 3 fresh seeds, and as many for 0.5 s each.
  EXPECT_NE(run.output.find("30 run(s) finished, 0 failed"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("finals planned: adamw <- adamw_lr"), std::string::npos) << run.output;
  const json manifest = json::parse(read_file(dir + "/manifest.json"));
  int finals = 0, wall = 0;
  for (const json& r : manifest["runs"]) {
    if (!r.contains("phase")) continue;
    ++finals;
    const std::string name = r["name"];
    const json e = json::parse(read_file(dir + "/runs/" + name + "/study_eval.json"));
    EXPECT_EQ(e["split"], "test") << name;
    EXPECT_TRUE(e["full_test_loss"].is_number() && e["full_val_loss"].is_number()) << name;
    EXPECT_NE(e["full_test_loss"], e["full_val_loss"]) << name;
    if (!r.value("wall_clock", false)) continue;
    ++wall;
    EXPECT_EQ(e["seconds_asked"], 0.5) << name;
    EXPECT_EQ(e["loadavg_start"].size(), 3u) << name;
    // What other processes took of the CPUs while it trained: a share of the machine, and the
    // run's own CPU time (its process tree's) at most what every core could give it.
    const json& other = e["other_cpu"];
    ASSERT_TRUE(other["other_share"].is_number()) << name << ": " << e.dump();
    EXPECT_GE(other["other_share"].get<double>(), 0.0) << name;
    EXPECT_LE(other["other_share"].get<double>(), 1.0) << name;
    EXPECT_GT(other["run_cpu_s"].get<double>(), 0.0) << name;
  }
  EXPECT_EQ(finals, 18);
  EXPECT_EQ(wall, 9);
  const CommandResult rep = study("report --allow-dirty " + dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(dir + "/REPORT.md");
  EXPECT_NE(md.find("# Study optimizers_smoke"), std::string::npos) << md;
  EXPECT_NE(md.find("## Finals"), std::string::npos) << md;
  EXPECT_NE(md.find("compared on the full test split"), std::string::npos) << md;
  EXPECT_NE(md.find("arm minus `adamw`"), std::string::npos) << md;
  EXPECT_NE(md.find("arm minus `adamw_wall0.5s`"), std::string::npos) << md;
  EXPECT_NE(md.find("| sgd_lr0.3 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Cost per optimizer"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir + "/finals_val_curves.png"));

  // `compare --tsv`: a header, then one row per run, the keys that differ and the summary's
  // figures as summary.json holds them (the same text: JSON numbers printed back exactly).
  const std::string r1 = dir + "/runs/adamw_lr0.01_seed1", r2 = dir + "/runs/lion_lr0.003_seed2";
  const CommandResult tsv =
      run_command(testing::ledgerlm_binary() + " compare --tsv " + r1 + " " + r2 + " 2>&1");
  ASSERT_EQ(tsv.exit_code, 0) << tsv.output;
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(tsv.output);
  for (std::string line; std::getline(lines, line);) {
    rows.emplace_back();
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) rows.back().push_back(cell);
  }
  ASSERT_EQ(rows.size(), 3u) << tsv.output;
  auto column = [&](const std::string& name) {
    const auto it = std::find(rows[0].begin(), rows[0].end(), name);
    return it == rows[0].end() ? -1 : static_cast<int>(it - rows[0].begin());
  };
  for (const char* key : {"optim.lr", "optim.name", "optim.weight_decay", "train.seed"})
    EXPECT_GE(column(key), 0) << key << " is not a column: " << tsv.output;
  EXPECT_EQ(column("train.max_steps"), -1) << "a key that does not differ: " << tsv.output;
  ASSERT_GE(column("final_val_loss"), 0) << tsv.output;
  EXPECT_EQ(rows[1].size(), rows[0].size());
  EXPECT_EQ(rows[1][0], "adamw_lr0.01_seed1");
  EXPECT_EQ(rows[2][column("optim.name")], "lion");
  EXPECT_EQ(rows[1][column("status")], "finished");
  EXPECT_EQ(rows[2][column("final_val_loss")],
            json::parse(read_file(r2 + "/summary.json"))["final_val_loss"].dump());
}

// configs/studies/global_batch_smoke.toml as CI runs it: the LR carried from G = 4 by each rule
// and the warmup a tenth of each run's steps, as the runs' config.toml record them. About 5 s.
TEST_F(StudySmoke, GlobalBatchSmokeStudyScalesTheLrByItsRule) {
  const std::string file =
      smoke_study_file("global_batch_smoke", "tiny_test.toml", root_ + "/data");
  ASSERT_FALSE(file.empty()) << "the smoke study no longer sets data.dir and config as expected";
  const std::string dir = root_ + "/gb_smoke";
  ASSERT_EQ(study("plan " + file + " --out " + dir).exit_code, 0);
  const CommandResult run = study("run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("18 run(s) finished, 0 failed"), std::string::npos) << run.output;
  // G = 16 = 4 x the base batch: linear 4 x 1e-2, sqrt 2 x 1e-2; 16384 / (16 x 32) = 32 steps,
  // warmup round(3.2) = 3. The trainer's resolved config records what the run trained with.
  const std::string lin = read_file(dir + "/runs/b1x8x2_lr-linear_seed1/config.toml");
  EXPECT_NE(lin.find("\nlr = 0.04\n"), std::string::npos) << lin;
  EXPECT_NE(lin.find("warmup_steps = 3\n"), std::string::npos) << lin;
  EXPECT_NE(lin.find("accum = 2"), std::string::npos) << lin;
  const std::string sq = read_file(dir + "/runs/b1x8x2_lr-sqrt_seed2/config.toml");
  EXPECT_NE(sq.find("\nlr = 0.02\n"), std::string::npos) << sq;
  const std::string fixed = read_file(dir + "/runs/b1x8x2_lr-fixed_seed2/config.toml");
  EXPECT_NE(fixed.find("\nlr = 0.01\n"), std::string::npos) << fixed;
  const CommandResult rep = study("report --allow-dirty " + dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(dir + "/REPORT.md");
  EXPECT_NE(md.find("arm minus `b1x4x1_lr-fixed`"), std::string::npos) << md;
}

// configs/studies/optimizers_modern_smoke.toml as CI runs it: the modern block at two widths and
// three token budgets, AdamW and Muon each tuned per width and budget, finals on three seeds,
// and the report's data-equivalent speedup: AdamW's fit per width, Muon's speedup per budget,
// its trend with budget and the ratio across widths. About 20 s.
TEST_F(StudySmoke, ModernOptimizersSmokeStudyReportsTheDataEquivalentSpeedupPerWidth) {
  const std::string file =
      smoke_study_file("optimizers_modern_smoke", "nanochat_demo.toml", root_ + "/data");
  ASSERT_FALSE(file.empty()) << "the smoke study no longer sets data.dir and config as expected";
  const std::string dir = root_ + "/modern_smoke";
  const CommandResult plan = study("plan " + file + " --out " + dir);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  // 2 optimizers x 2 widths x 3 budgets x 2 LRs x 2 seeds.
  EXPECT_NE(plan.output.find("48 run(s)"), std::string::npos) << plan.output;
  const CommandResult run = study("run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // And 12 arms (optimizer x width x budget) x 3 fresh seeds.
  EXPECT_NE(run.output.find("84 run(s) finished, 0 failed"), std::string::npos) << run.output;
  // The modern block's keys reached the runs: RMSNorm without weights, rotary positions.
  const std::string cfg =
      read_file(dir + "/runs/final_muon_n_embd32_max_tokens40960_seed13/config.toml");
  EXPECT_NE(cfg.find("position = \"rope\""), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("norm_weight = false"), std::string::npos) << cfg;
  const CommandResult rep = study("report --allow-dirty " + dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(dir + "/REPORT.md");
  EXPECT_NE(md.find("### model.n_embd = 16, train.max_tokens = 10240"), std::string::npos) << md;
  EXPECT_NE(md.find("## Data-equivalent speedup"), std::string::npos) << md;
  EXPECT_NE(md.find("### model.n_embd = 32\n"), std::string::npos) << md;
  EXPECT_NE(md.find("| muon | 40960 |"), std::string::npos) << md;
  EXPECT_NE(md.find("### Across families"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir + "/data_equivalent.png"));
}

// configs/studies/bcrit_bigram_smoke.toml as CI runs it, on this test's corpus (val bigram 0.70
// nats) with the target at 1.2: the report's grid of targets runs from 1.8 past the bigram to
// 0.7, every one of the four arms (beta2 fixed or at a token half-life, with and without the
// weights' moving average) gets its own B_crit(L), B_simple / B_crit with its verdict, B_crit's
// exponent against the tokens to target, and the pairs of arms that differ in one axis. About
// 20 s.
TEST_F(StudySmoke, BcritSmokeStudyFitsTheCriticalBatchPerArmPastTheBigram) {
  std::string text = read_file(testing::source_dir() + "/configs/studies/bcrit_bigram_smoke.toml");
  const std::string data_line = "\"data.dir\" = \"data_out/kjv512\"",
                    config = "../nanochat_demo.toml";
  const size_t data_at = text.find(data_line), config_at = text.find(config),
               target_at = text.find("\ntarget_loss = ");
  ASSERT_TRUE(data_at != std::string::npos && config_at != std::string::npos &&
              target_at != std::string::npos)
      << "the smoke study no longer sets data.dir, config and target_loss as expected";
  text.replace(target_at + 1, text.find('\n', target_at + 1) - target_at - 1, "target_loss = 1.2");
  text.replace(text.find(data_line), data_line.size(), "\"data.dir\" = \"" + root_ + "/data\"");
  text.replace(text.find(config), config.size(),
               testing::source_dir() + "/configs/nanochat_demo.toml");
  const std::string file = root_ + "/bcrit_smoke.toml", dir = root_ + "/bcrit_smoke";
  ASSERT_TRUE(write_file(file, text));
  const CommandResult plan = study("plan " + file + " --out " + dir);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  // 3 Gs x 5 LRs x 2 beta2 rules x 2 eval weights.
  EXPECT_NE(plan.output.find("60 run(s)"), std::string::npos) << plan.output;
  const CommandResult run = study("run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // The half-life reached the runs as beta2 = 0.5^(G x 32 / 1729): 0.9747 at G = 2.
  const json manifest = json::parse(read_file(dir + "/manifest.json"));
  bool checked = false;
  for (const json& r : manifest["runs"]) {
    if (r["axes"]["beta2_half_life"] != "1729" || r["axes"]["batch"] != "1x1x2") continue;
    EXPECT_NEAR(std::stod(r["overrides"]["optim.beta2"].get<std::string>()),
                std::pow(0.5, 64.0 / 1729.0), 1e-12)
        << r["name"];
    checked = true;
  }
  EXPECT_TRUE(checked) << "no run at G = 2 with the half-life";
  const CommandResult rep = study("report --allow-dirty " + dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(dir + "/REPORT.md");
  for (const std::string& want :
       {std::string("B_crit(L) at 12 targets from 1.8 to 0.7 nats"),
        std::string("| adamw beta2_half_life=1729 ema_half_life=512 | 0.7 * |"),
        std::string("- adamw beta2_half_life=0 ema_half_life=0: B_simple / B_crit "),
        std::string("### B_crit against the tokens to target"),
        std::string("| adamw beta2_half_life=0 ema_half_life=0 | adamw beta2_half_life=0 "
                    "ema_half_life=512 | ema_half_life |")})
    EXPECT_NE(md.find(want), std::string::npos) << "REPORT.md lacks `" << want << "`:\n" << md;
  EXPECT_TRUE(fs::exists(dir + "/bcrit_vs_target.png"));
}

}  // namespace
}  // namespace ledgerlm
