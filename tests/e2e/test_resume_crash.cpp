// Crash consistency through the ledgerlm binary: the trainer is killed with SIGKILL at each named
// stage of a checkpoint save (the save code's test hook LEDGERLM_TEST_CKPT_KILL=STAGE@N: data
// files written, meta.json written, renamed, `latest` written, pruning) and at seeded random
// points of the loop, then resumed with `--resume auto` (or started over when it died before its
// first checkpoint) until it finishes. The final weights, optimizer state and loss curve must equal
// the uninterrupted run's bit for bit (same thread count: same operations in the same order), every
// step must be logged exactly once in a metrics.jsonl that parses line by line, and no temporary
// may be left behind. Tiny model (L2 H2 C32 T32 B4, one thread), checkpoints every 2 steps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "ckpt/checkpoint.h"
#include "model/base/rng.h"
#include "tests/support/process_test_support.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

constexpr int64_t kSteps = 12;        // killed at save stages
constexpr int64_t kRandomSteps = 60;  // killed at random moments: long enough to land in

const testing::ResumeCorpus kCorpus{
    "crash_data_", [] {
      return testing::lcg_words({"kill", "nine", "resume", "the", "same", "bits", "step", "save"},
                                4242, 6000, 9);
    }};

std::string train_command(const std::string& out, const std::string& name, int64_t steps) {
  return testing::ledgerlm_binary() + " train" + kCorpus.flags(out, name) +
         " --ckpt.interval 2 --ckpt.keep 2 --optim.warmup_steps 2 --train.max_steps " +
         std::to_string(steps);
}

// The uninterrupted run of the stage tests, trained once per process.
const std::string& reference_dir() {
  static const std::string dir = [] {
    const std::string out = testing::make_temp_dir("crash_ref_");
    auto r = run_command(train_command(out, "ref", kSteps));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return out + "/ref";
  }();
  return dir;
}

bool has_checkpoint(const std::string& run_dir) {
  return !checkpoint_list(run_dir + "/ckpt").empty();
}

// Continues a killed run until it finishes by itself: --resume auto, or a fresh start over the
// killed one when it never completed a checkpoint.
void finish_run(const std::string& out, const std::string& name, int64_t steps) {
  const std::string run = out + "/" + name;
  const std::string how = has_checkpoint(run) ? " --resume auto" : " --train.overwrite true";
  auto r = run_command(train_command(out, name, steps) + how);
  ASSERT_EQ(r.exit_code, 0) << how << "\n" << r.output;
}

void expect_same_as_reference(const std::string& run, const std::string& reference, int64_t steps) {
  const auto ref = testing::clean_losses(reference);
  const auto got = testing::clean_losses(run);
  ASSERT_EQ(ref.size(), static_cast<size_t>(steps));
  ASSERT_EQ(got.size(), ref.size()) << run;
  for (const auto& [step, bits] : ref) EXPECT_EQ(got.at(step), bits) << "loss of step " << step;
  const std::string last = "/ckpt/" + checkpoint_dir_name(steps);
  for (const std::string& f : {std::string("/model.safetensors"), last + "/model.safetensors",
                               last + "/optimizer.safetensors"})
    EXPECT_TRUE(testing::read_file(reference + f) == testing::read_file(run + f))
        << f << " differs";
  EXPECT_TRUE(testing::temporaries(run).empty()) << testing::temporaries(run).front();
}

// Killed at STAGE of the 2nd save (step 4), or of the 1st (before any checkpoint exists).
class KillAtSaveStage : public ::testing::TestWithParam<const char*> {};

TEST_P(KillAtSaveStage, ResumesToTheSameBits) {
  const std::string out = testing::make_temp_dir("crash_stage_");
  auto killed = run_command("LEDGERLM_TEST_CKPT_KILL=" + std::string(GetParam()) + " exec " +
                            train_command(out, "run", kSteps));
  // sh reports a child killed by signal 9 as 128 + 9.
  ASSERT_TRUE(killed.exit_code == 137 || killed.exit_code == -1) << killed.output;
  EXPECT_EQ(killed.output.find("done:"), std::string::npos) << killed.output;
  finish_run(out, "run", kSteps);
  expect_same_as_reference(out + "/run", reference_dir(), kSteps);
}

INSTANTIATE_TEST_SUITE_P(Stages, KillAtSaveStage,
                         ::testing::Values("tensors@2", "meta@2", "rename@2", "latest@2", "prune@2",
                                           "meta@1", "latest@1"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           return name.replace(name.find('@'), 1, "_save");
                         });

// SIGKILL at seeded random points of the loop: five kill steps are drawn from the seed; for
// each, the run is started (or resumed), and once its log shows that step it is killed after a
// seeded jitter of 0-3 ms (so kills land in steps, metrics writes and checkpoint saves alike).
TEST(KillAtRandomMoments, ResumesToTheSameBits) {
  const std::string out = testing::make_temp_dir("crash_random_");
  const std::string run = out + "/run";
  auto ref = run_command(train_command(out, "ref", kRandomSteps));
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  std::vector<int64_t> targets;
  for (uint64_t k = 0; k < 5; ++k)
    targets.push_back(1 + rng_bits(20240601, RngStream::kData, k, 0)[0] % (kRandomSteps - 6));
  std::sort(targets.begin(), targets.end());
  int kills = 0;
  for (size_t k = 0; k < targets.size(); ++k) {
    std::string how = k == 0 ? "" : " --resume auto";
    if (k > 0 && !has_checkpoint(run)) how = " --train.overwrite true";
    const pid_t pid = testing::start_background(train_command(out, "run", kRandomSteps) + how,
                                                out + "/attempt.log");
    testing::wait_loss_records(run, static_cast<size_t>(targets[k]), 30);
    const uint32_t jitter_us = rng_bits(20240601, RngStream::kData, k, 1)[0] % 3000;
    std::this_thread::sleep_for(std::chrono::microseconds(jitter_us));
    kill(pid, SIGKILL);
    const int status = testing::wait_exit(pid, 30);
    kills += WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  }
  EXPECT_EQ(kills, 5) << "a kill did not land: " << testing::read_file(out + "/attempt.log");
  finish_run(out, "run", kRandomSteps);
  expect_same_as_reference(run, out + "/ref", kRandomSteps);
}

}  // namespace
}  // namespace ledgerlm
