// scripts/plot.py from the shell, on the experiments' published runs under results/ (their
// metrics.jsonl.gz): a figure from runs given one by one with labels, from a directory of runs,
// and as a band over seeds; a run without the metric left out with a note; and the bad inputs a
// user makes (a path that is not a run, a metric no run has), each one error line, a non-zero
// exit and no image written or replaced.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // test_util.h's helpers

class PlotCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("ledgerlm_plot_");
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string runs() { return testing::source_dir() + "/results/optimizers/runs"; }
  // Three finals of the published optimizer study: two seeds of one arm and another arm.
  static std::string adamw(int seed) {
    return runs() + "/final_adamw_max_tokens739328_seed" + std::to_string(seed);
  }
  static std::string lamb() { return runs() + "/final_lamb_max_tokens739328_seed101"; }

  // Runs plot.py with ARGS; stderr goes into the result's output with stdout.
  static CommandResult plot(const std::string& args) {
    return run_command(testing::python3() + " " + testing::source_dir() + "/scripts/plot.py " +
                       args + " 2>&1");
  }

  // A whole PNG: the signature and the IEND chunk that ends the file.
  static void expect_png(const std::string& path) {
    ASSERT_TRUE(fs::exists(path)) << path;
    const std::string bytes = read_file(path);
    ASSERT_GT(bytes.size(), 1000u) << path;
    EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
    EXPECT_NE(bytes.find("IEND"), std::string::npos) << path;
    EXPECT_FALSE(fs::exists(path + ".tmp.png")) << "a temporary image was left behind";
  }

  std::string dir_;
};

TEST_F(PlotCli, LabelledRunsDirectoryOfRunsAndSeedBand) {
  const std::string one = dir_ + "/labelled.png";
  CommandResult r = plot("--out " + one + " --metric loss,val_loss --smooth 5 adamw=" + adamw(101) +
                         " lamb=" + lamb());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plot: wrote " + one), std::string::npos) << r.output;
  expect_png(one);

  const std::string all = dir_ + "/all.png";
  r = plot("--out " + all + " --x step --logy " + runs());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_png(all);

  const std::string band = dir_ + "/band.png";
  r = plot("--out " + band + " --metric loss --band adamw=" + adamw(101) + " adamw=" + adamw(102));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_png(band);
}

// A run killed while writing leaves its last metrics.jsonl line cut: the whole records before it
// are plotted, with a note (it was refused: "not JSON"). --out into a folder not made yet is
// made (it was a traceback); a folder that cannot be made is one error line.
TEST_F(PlotCli, CutLastLineIsSkippedAndTheOutFolderIsMade) {
  const std::string run = dir_ + "/killed";
  fs::create_directories(run);
  CommandResult r =
      run_command("gzip -dc " + adamw(101) + "/metrics.jsonl.gz > " + run +
                  "/metrics.jsonl && printf '{\"step\": 99, \"tok' >> " + run + "/metrics.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string out = dir_ + "/new/sub/figure.png";
  r = plot("--out " + out + " --metric loss " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("metrics.jsonl:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": skipped the incomplete last line"), std::string::npos) << r.output;
  expect_png(out);

  ASSERT_TRUE(testing::write_file(dir_ + "/file", "not a folder"));
  r = plot("--out " + dir_ + "/file/figure.png --metric loss " + run);
  EXPECT_NE(r.exit_code, 0);
  const size_t at = r.output.find("plot: cannot create the folder of --out");
  EXPECT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin() + (at == std::string::npos ? 0 : at), r.output.end(), '\n'),
            1)
      << r.output;

  // A cut line that is not the last is damage, refused as before.
  r = run_command("echo '{\"step\": 100}' >> " + run + "/metrics.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = plot("--out " + out + " --metric loss " + run);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("not JSON"), std::string::npos) << r.output;
}

// A sweep's run that diverged before its first eval has no val_loss: a directory holding it
// still gives the figure of the others, with a note naming the run left out (it was an error
// that cost the whole figure).
TEST_F(PlotCli, ARunWithoutTheMetricIsLeftOutWithANote) {
  const std::string sweep = dir_ + "/sweep";
  fs::create_directories(sweep + "/stable");
  fs::create_directories(sweep + "/diverged");
  CommandResult r = run_command("gzip -dc " + adamw(101) + "/metrics.jsonl.gz > " + sweep +
                                "/stable/metrics.jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_TRUE(testing::write_file(sweep + "/diverged/metrics.jsonl",
                                  "{\"step\": 1, \"tokens\": 512, \"loss\": 6.2}\n"));
  const std::string out = dir_ + "/val.png";
  r = plot("--out " + out + " --metric val_loss " + sweep);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plot: diverged: no records with both 'tokens' and 'val_loss': left out"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("stable:"), std::string::npos) << r.output;
  expect_png(out);

  // When no run has it, that is the error, and nothing is written.
  fs::remove(out);
  r = plot("--out " + out + " --metric no_such_metric " + sweep);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output.rfind("plot: none of the 2 runs: no records with both", 0), 0u) << r.output;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(PlotCli, BadInputIsOneErrorLineAndWritesNothing) {
  const std::string out = dir_ + "/figure.png";
  // An image already there from an earlier call must survive a failed one.
  ASSERT_TRUE(testing::write_file(out, "previous figure"));
  struct Case {
    std::string args, expected;
  };
  for (const Case& c : {Case{dir_ + "/no_such_run", "plot: cannot read " + dir_ + "/no_such_run"},
                        Case{dir_, "plot: " + dir_ + ": neither a run nor a directory of runs"},
                        Case{"--metric no_such_metric " + adamw(101),
                             "plot: final_adamw_max_tokens739328_seed101: no records with both "
                             "'tokens' and 'no_such_metric'"}}) {
    const CommandResult r = plot("--out " + out + " " + c.args);
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_EQ(r.output.rfind(c.expected, 0), 0u) << c.args << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_EQ(read_file(out), "previous figure") << c.args;
  }
}

}  // namespace
}  // namespace ledgerlm
