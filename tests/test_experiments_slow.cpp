// The experiment scripts at their minimal size (EXP_SIZE=smoke: a tiny model, a few steps, the
// same tables as the default size): each runs to the end, and its REPORT.md is complete and
// agrees with its runs' summary.json, metrics.jsonl and config.toml, as checked by an
// independent reader (tests/tools/check_exp_report.py), and so does its published copy
// (EXP_PUBLISH: what results/ holds). The one global batch's splits, dropout on, stay within the
// stated tolerance of the reference. The checker itself must catch an altered cell and a run
// left out of the tables.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

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
    const CommandResult r = run_command("EXP_SIZE=smoke EXP_DATA=" + root_ +
                                        "/data EXP_OUT=" + out + " EXP_PUBLISH=" + root_ + "/pub_" +
                                        name + " LEDGERLM_BIN=" + testing::ledgerlm_binary() + " " +
                                        testing::source_dir() + "/scripts/exp_" + name + ".sh");
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
  for (const char* part :
       {"## A. One global batch", "## B. Scaling", "## C. A large batch", "| 2x2x2 | eq_2x2x2_s1 |",
        "| 4x1x2 | eq_4x1x2_s1 |", "dropout 0.1", "eq_1x8x1_s1, eq_1x8x1_s2, eq_1x8x1_s3",
        "| peak act MB |", "Tolerance: a tenth of the seed spread",
        "**every split is within the tolerance**"})
    EXPECT_NE(report.find(part), std::string::npos) << part;
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
  // The published copy: the report, its figures and the runs' small files, no weights.
  const std::string pub = root_ + "/pub_optimizers";
  r = check(pub);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::exists(pub + "/optimizers.png"));
  EXPECT_TRUE(std::filesystem::exists(pub + "/runs/final_sgd_s1/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(pub + "/runs/final_sgd_s1/model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(pub + "/runs/final_sgd_s1/ckpt"));
  const std::string report = read_file(dir + "/REPORT.md");
  EXPECT_NE(report.find("| optim ms | state bytes/param | peak MB | ckpt MB |"), std::string::npos);
  for (const char* opt : {"sgd", "adamw", "lamb", "lars", "adafactor", "adamw8bit", "adamw_bf16"})
    EXPECT_NE(report.find("final_" + std::string(opt) + "_s1, final_" + opt + "_s2"),
              std::string::npos)
        << opt << " has no final row";

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

  // A run left out: its sweep row removed.
  std::string dropped = report;
  const size_t line = dropped.find("| sgd | 0.1 | sweep_sgd_lr0.1 |");
  ASSERT_NE(line, std::string::npos);
  dropped.erase(line, dropped.find('\n', line) + 1 - line);
  ASSERT_TRUE(write_file(dir + "/REPORT.md", dropped));
  r = check(dir);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("run sweep_sgd_lr0.1 appears in no table"), std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ledgerlm
