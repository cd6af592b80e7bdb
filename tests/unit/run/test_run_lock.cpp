// The run lock (train/run/run_lock.h) in-process: a second holder is refused with a message naming
// the first until it lets go, and the stale-temporary sweep removes temporaries and nothing else.
// Two `ledgerlm train` jobs on one run: tests/e2e/test_two_jobs_one_run.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "model/base/check.h"
#include "tests/support/process_test_support.h"
#include "tests/support/test_util.h"
#include "train/run/run_lock.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

using testing::error_of;

TEST(RunLock, SecondHolderRefusedUntilReleased) {
  const std::string dir = testing::make_temp_dir("run_lock_unit_");
  auto first = RunLock::acquire(dir, "ledgerlm train --first");
  const std::string err = error_of([&] { RunLock::acquire(dir, "ledgerlm train --second"); });
  EXPECT_NE(err.find("is in use by pid " + std::to_string(getpid())), std::string::npos) << err;
  EXPECT_NE(err.find("ledgerlm train --first"), std::string::npos) << err;
  first.reset();
  EXPECT_EQ(error_of([&] { RunLock::acquire(dir, "ledgerlm train --third"); }), "");
}

// The stale-temporary sweep: *.tmp files and checkpoint temporaries, nothing else.
TEST(RunLock, StaleSweepRemovesOnlyTemporaries) {
  const std::string dir = testing::make_temp_dir("run_lock_sweep_");
  fs::create_directories(dir + "/ckpt/.tmp_step_000004_123");
  for (const char* f : {"config.toml.tmp", "metrics.jsonl.tmp", "config.toml", "metrics.jsonl"})
    ASSERT_TRUE(testing::write_file(dir + "/" + f, "x"));
  EXPECT_EQ(run_dir_remove_stale(dir), 3);
  EXPECT_TRUE(testing::temporaries(dir).empty());
  EXPECT_TRUE(fs::exists(dir + "/config.toml") && fs::exists(dir + "/metrics.jsonl"));
}

}  // namespace
}  // namespace ledgerlm
