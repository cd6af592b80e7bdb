// Run directory helpers (train/run/run_dir.h): metrics.jsonl cut back on resume — records after the
// checkpoint's step and, new, lines that do not parse (a record cut by a kill or a full disk used
// to stay inside the file after the resume) —, checked atomic writes, and shell quoting of the
// paths in printed commands.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "model/base/check.h"
#include "tests/support/test_util.h"
#include "train/run/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

TEST(RunMetrics, ResumeDropsLaterAndUnparseableRecords) {
  const std::string dir = testing::make_temp_dir("run_dir_metrics_");
  ASSERT_TRUE(testing::write_file(dir + "/metrics.jsonl",
                                  "{\"step\":1,\"loss\":2.5}\n"
                                  "{\"step\":2,\"lo\n"  // cut mid-record, then appended to
                                  "{\"step\":2,\"loss\":2.4}\n"
                                  "not json at all\n"
                                  "{\"step\":3,\"loss\":2.3}\n"
                                  "{\"step\":4,\"loss\":2.2}\n"
                                  "{\"step\":5,\"lo"));  // cut at the end
  EXPECT_EQ(run_metrics_truncate(dir, 3), 3);
  EXPECT_EQ(testing::read_file(dir + "/metrics.jsonl"),
            "{\"step\":1,\"loss\":2.5}\n{\"step\":2,\"loss\":2.4}\n{\"step\":3,\"loss\":2.3}\n");
  EXPECT_FALSE(fs::exists(dir + "/metrics.jsonl.tmp"));
  // A clean log up to the step stays byte for byte as it was.
  EXPECT_EQ(run_metrics_truncate(dir, 3), 0);
  EXPECT_EQ(testing::read_file(dir + "/metrics.jsonl"),
            "{\"step\":1,\"loss\":2.5}\n{\"step\":2,\"loss\":2.4}\n{\"step\":3,\"loss\":2.3}\n");
}

TEST(RunDir, AtomicWriteFailsNamingTheFileAndLeavesTheOld) {
  const std::string dir = testing::make_temp_dir("run_dir_write_");
  write_file_atomic(dir + "/config.toml", "old\n");
  EXPECT_EQ(testing::read_file(dir + "/config.toml"), "old\n");
  // A directory where the temporary file should go makes every write fail.
  fs::create_directories(dir + "/config.toml.tmp");
  try {
    write_file_atomic(dir + "/config.toml", "new\n");
    FAIL() << "write into a blocked path succeeded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '" + dir + "/config.toml'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(testing::read_file(dir + "/config.toml"), "old\n");
}

TEST(RunDir, ShellQuoting) {
  EXPECT_EQ(shell_quote("runs/exp-1.v2/config.toml"), "runs/exp-1.v2/config.toml");
  EXPECT_EQ(shell_quote("runs #1/x"), "'runs #1/x'");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("$HOME`x`"), "'$HOME`x`'");
  // Through the shell the quoted word is the original text again.
  const std::string text = "a b#c 'd' $e \"f\" \\g";
  auto r = testing::run_command("printf %s " + shell_quote(text));
  EXPECT_EQ(r.output, text);
}

}  // namespace
}  // namespace ledgerlm
