// One job per run, through the ledgerlm binary. Before the lock (train/run/run_lock.h), two
// `--resume auto` on one run both started, each save deleted the other's temporary checkpoint
// directories, and the survivor could exit 0 with a truncated metrics.jsonl; `--train.overwrite
// true` on a live run killed it the same way. Now a second job is refused with one line naming the
// holder, the first finishes untouched, and temporaries are removed only by the next job that takes
// the lock. The lock's own API: tests/unit/run/test_run_lock.cpp.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "ckpt/checkpoint.h"
#include "tests/support/process_test_support.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

const testing::ResumeCorpus kCorpus{"run_lock_data_", [] {
                                      std::string text;
                                      for (int i = 0; i < 3000; ++i)
                                        text += (i % 7 == 0) ? "lock step.\n" : "one job per run ";
                                      return text;
                                    }};

class TwoJobsOneRun : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = testing::make_temp_dir("run_lock_runs_");
    run_ = out_ + "/run";
    flags_ = kCorpus.flags(out_, "run") + " --ckpt.interval 5";
  }
  // A second job's command on the same run: refused with one line naming the first's pid.
  void expect_refused(const std::string& args, pid_t holder) {
    auto r = run_command(testing::ledgerlm_binary() + " train " + args);
    EXPECT_NE(r.exit_code, 0) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("ledgerlm: error: run '" + run_ + "' is in use by pid " +
                            std::to_string(holder)),
              std::string::npos)
        << args << "\n"
        << r.output;
  }
  std::string out_, run_, flags_;
};

TEST_F(TwoJobsOneRun, SecondIsRefusedFirstFinishesUntouched) {
  const pid_t first = testing::start_background(
      testing::ledgerlm_binary() + " train" + flags_ + " --train.max_steps 1000000",
      out_ + "/first.log");
  ASSERT_TRUE(testing::wait_loss_records(run_, 12, 30)) << testing::read_file(out_ + "/first.log");
  // A leftover of some earlier job that was killed: the live job's saves must leave it alone.
  fs::create_directories(run_ + "/ckpt/.tmp_step_000099_1");

  expect_refused(flags_ + " --train.max_steps 20 --resume auto", first);
  expect_refused(flags_ + " --train.max_steps 20 --train.overwrite true", first);
  expect_refused("--config " + run_ + "/config.toml --resume auto", first);
  auto plain = run_command(testing::ledgerlm_binary() + " train" + flags_ + " --train.max_steps 3");
  EXPECT_NE(plain.output.find("already exists"), std::string::npos) << plain.output;

  ASSERT_TRUE(testing::wait_loss_records(run_, testing::loss_records(run_) + 12, 30));
  EXPECT_TRUE(fs::exists(run_ + "/ckpt/.tmp_step_000099_1"));
  ASSERT_TRUE(testing::write_file(run_ + "/STOP", ""));
  const int status = testing::wait_exit(first, 30);
  const std::string log = testing::read_file(out_ + "/first.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << log;  // stopped, resumable
  // Untouched: every step from 1 to the last one logged once, and its checkpoint complete.
  const auto losses = testing::clean_losses(run_);
  ASSERT_FALSE(losses.empty());
  const int64_t last = losses.rbegin()->first;
  EXPECT_EQ(static_cast<int64_t>(losses.size()), last) << log;
  EXPECT_EQ(checkpoint_latest(run_ + "/ckpt"), run_ + "/ckpt/" + checkpoint_dir_name(last));
  CheckpointReader::open(checkpoint_latest(run_ + "/ckpt")).verify_all();

  // The lock went with the process: the next job takes it and sweeps the leftover.
  auto next =
      run_command(testing::ledgerlm_binary() + " train --config " + run_ +
                  "/config.toml --resume auto --train.max_steps " + std::to_string(last + 2));
  ASSERT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("removed 1 leftover"), std::string::npos) << next.output;
  EXPECT_TRUE(testing::temporaries(run_).empty());
  EXPECT_EQ(static_cast<int64_t>(testing::clean_losses(run_).size()), last + 2);
}

// The lock file removed under a live job (by hand, by a cleanup script): the flock lives on the
// descriptor, so a second job could take a new lock on the same path. The first notices at its
// next step that the path is no longer the file it locked and stops with one line, writing
// nothing more; before, it went on and ended "done", exit 0, interleaving its metrics with the
// second job's.
TEST_F(TwoJobsOneRun, RemovedLockStopsTheJobThatHeldIt) {
  const pid_t first = testing::start_background(
      testing::ledgerlm_binary() + " train" + flags_ + " --train.max_steps 1000000",
      out_ + "/first.log");
  ASSERT_TRUE(testing::wait_loss_records(run_, 3, 30)) << testing::read_file(out_ + "/first.log");
  ASSERT_TRUE(fs::remove(run_ + "/.lock"));
  const int status = testing::wait_exit(first, 30);
  const std::string log = testing::read_file(out_ + "/first.log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_NE(WEXITSTATUS(status), 0) << log;
  EXPECT_NE(log.find("run lock '" + run_ +
                     "/.lock' was removed or replaced while this job held "
                     "it"),
            std::string::npos)
      << log;
  // Steps 1..n logged once each: nothing written after the lock went.
  const auto losses = testing::clean_losses(run_);
  ASSERT_FALSE(losses.empty());
  EXPECT_EQ(static_cast<int64_t>(losses.size()), losses.rbegin()->first);
}

// kill -9 releases the lock as well: there are no stale locks.
TEST_F(TwoJobsOneRun, KilledHolderLeavesNoStaleLock) {
  const pid_t first = testing::start_background(
      testing::ledgerlm_binary() + " train" + flags_ + " --train.max_steps 1000000",
      out_ + "/first.log");
  ASSERT_TRUE(testing::wait_loss_records(run_, 3, 30));
  kill(first, SIGKILL);
  testing::wait_exit(first, 10);
  auto r = run_command(testing::ledgerlm_binary() + " train" + flags_ +
                       " --train.max_steps 3 --train.overwrite true");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace ledgerlm
