// The experiment scripts at their minimal size (--size smoke: a tiny model, a few steps, the
// same tables as the default size): each runs to the end, and its REPORT.md is complete and
// agrees with its runs' summary.json, metrics.jsonl and config.toml, as checked by an
// independent reader (tests/tools/check_exp_report.py), and so does its published copy
// (EXP_PUBLISH: what results/ holds). The one global batch's splits, dropout on, stay within the
// stated tolerance of the reference. The checker itself must catch an altered cell, a wrong
// verdict against the seed spread and a run left out of the tables.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using testing::CommandResult;
using testing::read_file;
using testing::run_command;
using testing::write_file;

class ExperimentSmoke : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::make_temp_dir("ledgerlm_exp_");
    ASSERT_FALSE(root_.empty());
    std::string text;
    for (int i = 0; text.size() < 40000; ++i)
      text += "in the beginning was the word, and the word was " + std::to_string(i % 31) + ".\n";
    ASSERT_TRUE(write_file(root_ + "/corpus.txt", text));
    const CommandResult r = run_command(testing::ledgerlm_binary() + " prepare --input " + root_ +
                                        "/corpus.txt --out " + root_ + "/data --tokenizer bytes");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // Runs scripts/exp_NAME.sh at the smoke size into ROOT/NAME, publishing to ROOT/pub_NAME;
  // returns ROOT/NAME.
  static std::string run_experiment(const std::string& name) {
    const std::string out = root_ + "/" + name;
    const CommandResult r =
        run_command("EXP_DATA=" + root_ + "/data EXP_OUT=" + out + " EXP_PUBLISH=" + root_ +
                    "/pub_" + name + " LEDGERLM_BIN=" + testing::ledgerlm_binary() + " " +
                    testing::source_dir() + "/scripts/exp/exp_" + name + ".sh --size smoke");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out;
  }

  static CommandResult check(const std::string& dir) {
    return run_command(testing::python3() + " " + testing::source_dir() +
                       "/tests/tools/check_exp_report.py " + dir);
  }

  static std::string root_;
};

std::string ExperimentSmoke::root_;

TEST_F(ExperimentSmoke, GlobalBatchReportAgreesWithItsRuns) {
  if (run_command("command -v mpirun").exit_code != 0) GTEST_SKIP() << "skipped: no mpirun";
  const std::string dir = run_experiment("global_batch");
  CommandResult r = check(dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = check(root_ + "/pub_global_batch");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  const std::string report = read_file(dir + "/REPORT.md");
  for (const char* part : {"## A. One global batch",
                           "## B. Scaling",
                           "## C. Large batch",
                           "| 2x2x2 | eq_2x2x2_s1 |",
                           "| 4x1x2 | eq_4x1x2_s1 |",
                           "dropout 0.1",
                           "eq_1x8x1_s1, eq_1x8x1_s2, eq_1x8x1_s3",
                           "| peak act MB |",
                           "Tolerance: a tenth of the seed spread",
                           "**every split is within the tolerance**",
                           "| 8 | fixed | scale_fixed_g8_s1, scale_fixed_g8_s2 |",
                           "| 32 | linear | scale_linear_g32_s1, scale_linear_g32_s2 |",
                           "| Δ vs fixed (same G) |",
                           "| Δ vs adamw (same G) |",
                           "| 128 | lars | 80 | 2 | large_lars_g128_s1, large_lars_g128_s2 |",
                           "**Largest global batch of this run: 128 sequences",
                           "**Where does AdamW stop keeping up?**",
                           "scaling.png",
                           "scaling_final.png",
                           "large_batch.png",
                           "large_batch_final.png"})
    EXPECT_NE(report.find(part), std::string::npos) << part;
  // A verdict against the seed spread turned round: the checker recomputes it. The row's one
  // yes/no cell is its `beyond seed spread`.
  const size_t at = report.find("| large_lamb_g16_s1, large_lamb_g16_s2 |");
  ASSERT_NE(at, std::string::npos);
  const size_t begin = report.rfind('\n', at) + 1, end = report.find('\n', at);
  std::string line = report.substr(begin, end - begin);
  const bool was_yes = line.find("| yes |") != std::string::npos;
  const size_t cell = line.find(was_yes ? "| yes |" : "| no |");
  ASSERT_NE(cell, std::string::npos) << line;
  line.replace(cell, was_yes ? 7 : 6, was_yes ? "| no |" : "| yes |");
  std::string flipped = report;
  flipped.replace(begin, end - begin, line);
  ASSERT_TRUE(write_file(dir + "/REPORT.md", flipped));
  r = check(dir);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("'beyond seed spread' says"), std::string::npos) << r.output;
  ASSERT_TRUE(write_file(dir + "/REPORT.md", report));
  // Under mpirun rank 0 alone writes the run's TensorBoard file: one file, every step once.
  const CommandResult ev =
      run_command(testing::python3() + " " + testing::source_dir() +
                  "/tests/tools/tb_events_read.py " + dir + "/runs/eq_4x1x2_s1/events.out.*");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  const nlohmann::json events = nlohmann::json::parse(ev.output);
  int losses = 0;
  for (const auto& e : events["events"]) losses += e["scalars"].contains("train/loss") ? 1 : 0;
  EXPECT_EQ(losses, 6) << "the smoke size's equivalence runs take 6 steps";
}

TEST_F(ExperimentSmoke, OptimizersReportAgreesWithItsRunsAndTheCheckerCatchesChanges) {
  const std::string dir = run_experiment("optimizers");
  CommandResult r = check(dir);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // The published copy: the report, its figures and the runs' small files (the log gzipped), no
  // weights, no checkpoints, no lock.
  const std::string pub = root_ + "/pub_optimizers";
  r = check(pub);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(pub + "/optimizers_wall.png"));
  EXPECT_TRUE(std::filesystem::exists(pub + "/runs/wall_sgd_s1/metrics.jsonl.gz"));
  EXPECT_TRUE(std::filesystem::exists(pub + "/runs/wall_sgd_s1/summary.json"));
  for (const char* f : {"metrics.jsonl", "model.safetensors", "ckpt", ".lock"})
    EXPECT_FALSE(std::filesystem::exists(pub + "/runs/wall_sgd_s1/" + f)) << f;
  const std::string report = read_file(dir + "/REPORT.md");
  EXPECT_NE(report.find("| optim ms | state bytes/param | peak MB | ckpt MB |"), std::string::npos);
  for (const char* part :
       {"## 3a. Final: the same token budget", "## 3b. Final: the same wall-clock",
        "| budget asked s | tokens it became |", "optimizers_tokens.png", "optimizers_wall.png"})
    EXPECT_NE(report.find(part), std::string::npos) << part;
  for (const char* opt : {"sgd", "adamw", "lamb", "lars", "adafactor", "adamw8bit", "adamw_bf16"}) {
    EXPECT_NE(report.find("wall_" + std::string(opt) + "_s1, wall_" + opt + "_s2"),
              std::string::npos)
        << opt << " has no wall-clock row";
    EXPECT_NE(report.find(", tok_" + std::string(opt) + "_s2 |"), std::string::npos)
        << opt << " has no same-token row";
  }

  // One cell changed: the calibration run's step count.
  const std::string row = "| sgd | calib_sgd | ";
  const size_t at = report.find(row);
  ASSERT_NE(at, std::string::npos);
  std::string altered = report;
  altered.replace(at + row.size(), 2, "99");
  ASSERT_TRUE(write_file(dir + "/REPORT.md", altered));
  r = check(dir);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("column 'steps'"), std::string::npos) << r.output;

  // A run left out: the row of an LR the sweep did not choose (a chosen one is in 3a too).
  std::string dropped = report, lr;
  size_t line = std::string::npos;
  for (const char* candidate : {"0.03", "0.1", "0.3"}) {
    line = dropped.find("| sgd | " + std::string(candidate) + " | sweep_sgd_lr");
    if (line != std::string::npos &&
        dropped.substr(line, dropped.find('\n', line) - line).find("| yes |") ==
            std::string::npos) {
      lr = candidate;
      break;
    }
  }
  ASSERT_FALSE(lr.empty());
  dropped.erase(line, dropped.find('\n', line) + 1 - line);
  ASSERT_TRUE(write_file(dir + "/REPORT.md", dropped));
  r = check(dir);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("run sweep_sgd_lr" + lr + " appears in no table"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ledgerlm
