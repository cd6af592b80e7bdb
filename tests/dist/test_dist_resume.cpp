// Checkpoints across world sizes and stages, and stopping a job of several ranks:
//   - a run of 4 ranks at ZeRO-3 resumes on 2 ranks at ZeRO-1 and then on 1 rank: the loss
//     curve and the final weights and states equal an uninterrupted single-process run of the
//     same global batch within the equivalence tolerances (test_dist_equivalence.cpp);
//   - at the same world and stage a resume is bitwise (stages 1 and 3);
//   - runs/NAME/STOP and SIGUSR1 to mpirun stop every rank after the same step with a saved
//     checkpoint and exit 0, and the run resumes from it;
//   - Ctrl-C on mpirun (SIGTERM to the ranks, SIGKILL a second later) leaves the last checkpoint
//     intact, the output says how to resume, and the resume works.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

class DistResume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::mpirun_path().empty()) return;
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "In the beginning was the word, verse " + std::to_string(i) + ".\n";
    data_ = testing::resume_prepare_corpus("ledgerlm_dist_resume_", text);
    out_ = fs::path(data_).parent_path().string() + "/runs";
  }
  // A constant LR (legs of different lengths share one schedule), global batch 8.
  static std::string flags(const std::string& name, int world, int stage, int steps) {
    return testing::resume_tiny_flags(data_, out_, name) + " --train.max_steps " +
           std::to_string(steps) + " --train.micro_batch " + std::to_string(8 / world) +
           " --dist.zero " + std::to_string(stage) +
           " --optim.schedule constant --optim.warmup_steps 0 --model.dropout 0.1";
  }
  static std::string resume(const std::string& name, int world, int stage, int steps) {
    return " --config " + dir(name) + "/config.toml --resume auto --train.max_steps " +
           std::to_string(steps) + " --train.micro_batch " + std::to_string(8 / world) +
           " --dist.zero " + std::to_string(stage);
  }
  static std::string dir(const std::string& name) { return out_ + "/" + name; }
  static std::string train(int world, const std::string& args) {
    return testing::mpirun_prefix(world) + testing::ledgerlm_binary() + " train" + args;
  }
  static std::string data_, out_;
};
std::string DistResume::data_, DistResume::out_;

void expect_tensors_close(const std::string& a_dir, const std::string& b_dir, double rtol,
                          bool bitwise) {
  const auto a = testing::run_tensors(a_dir), b = testing::run_tensors(b_dir);
  double worst = 0.0;  // max|a-b| / max|ref| over the tensors
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, ref] : b) {
    if (bitwise) {
      EXPECT_TRUE(a.at(key) == ref) << key << " differs";
      continue;
    }
    // The key part of attn.qkv.bias has a zero gradient in exact arithmetic (its values are
    // rounding noise, see test_dist_equivalence.cpp): compared without it.
    std::vector<double> x = a.at(key), y = ref;
    if (key.find("attn.qkv.bias") != std::string::npos) {
      const size_t c = y.size() / 3;
      x.erase(x.begin() + c, x.begin() + 2 * c);
      y.erase(y.begin() + c, y.begin() + 2 * c);
    }
    auto r = testing::compare_tensor(key, x.data(), y.data(), static_cast<int64_t>(y.size()), 1e-12,
                                     rtol);
    EXPECT_TRUE(r.ok) << r.message;
    worst = std::max(worst, r.bound > 0 ? r.max_abs_diff / r.bound * rtol : 0.0);
  }
  if (!bitwise) std::printf("largest difference %.2e of max|ref|\n", worst);
}

// 4 ranks ZeRO-3 for 2 steps -> 2 ranks ZeRO-1 to step 4 -> 1 rank to step 6, against one
// process for 6 steps. Every leg reorders the same sums (test_dist_equivalence.cpp): loss 1e-7
// relative; weights and states 1e-3 of max|ref| per tensor. Measured 1.1e-4: a weight of 0.011
// 4e-6 apart, 1/800 of one AdamW step (lr 3e-3) — the differences grow with the steps where a
// gradient is small against its rounding noise; a fault (a lost gradient, a wrong shard loaded)
// moves weights by whole steps, ~8% of max|ref|, and changes the loss.
TEST_F(DistResume, FourRanksStageThreeToTwoRanksStageOneToOneRank) {
  LEDGERLM_REQUIRE_MPI();
  CommandResult r =
      testing::run_command(testing::ledgerlm_binary() + " train" + flags("ref", 1, 0, 6) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command(train(4, flags("chain", 4, 3, 2)) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command(train(2, resume("chain", 2, 1, 4)) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume: dist.zero changed from 3 to 1"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("global batch changed"), std::string::npos)
      << "4 x 2 and 2 x 4 are the same global batch\n"
      << r.output;
  r = testing::run_command(testing::ledgerlm_binary() + " train" + resume("chain", 1, 0, 6) +
                           " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> got = testing::run_losses(dir("chain"));
  const std::vector<double> ref = testing::run_losses(dir("ref"));
  ASSERT_EQ(got.size(), 6u) << "metrics.jsonl reads as one run of 6 steps";
  ASSERT_EQ(ref.size(), 6u);
  for (size_t s = 0; s < ref.size(); ++s)
    EXPECT_NEAR(got[s], ref[s], 1e-7 * ref[s]) << "step " << s + 1;
  expect_tensors_close(dir("chain"), dir("ref"), 1e-3, false);
  // The run trained under mpirun is an ordinary run: eval, sample and export work on it.
  const std::string bin = testing::ledgerlm_binary();
  for (const std::string& cmd :
       {bin + " eval --run " + dir("chain") + " --max-windows 4",
        bin + " sample --run " + dir("chain") + " --prompt In --tokens 8 --seed 1",
        bin + " export --run " + dir("chain") + " --format hf --out " + out_ + "/chain_hf"}) {
    r = testing::run_command(cmd + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << cmd << "\n" << r.output;
  }
}

// One rank's run resumed on two with the same micro-batch doubles the global batch: no config key
// changed, and the resume says it in one line.
TEST_F(DistResume, MoreRanksNameTheChangedGlobalBatch) {
  LEDGERLM_REQUIRE_MPI();
  CommandResult r = testing::run_command(testing::ledgerlm_binary() + " train" +
                                         flags("grow", 1, 0, 2) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command(train(2, resume("grow", 1, 0, 3)) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume: global batch changed from 8 to 16 sequences (world 1->2, "
                          "micro-batch 8->8, accum 1->1)\n"),
            std::string::npos)
      << r.output;
}

// The same chain (4 ranks ZeRO-3 -> 2 ranks ZeRO-1 -> 1 rank) for the optimizers with state of
// their own kinds: Lion, Schedule-Free (x in the master, y in the compute copy, scalars),
// AdEMAMix (its warmup length fixed, since each leg asks for another run length) and Muon (its
// matrices gathered to owners at stages 3 and 1, whole at world 1), same tolerances.
TEST_F(DistResume, NewOptimizersResumeAcrossWorldSizesAndStages) {
  LEDGERLM_REQUIRE_MPI();
  const std::vector<std::pair<std::string, std::string>> optimizers = {
      {"lion", " --optim.name lion --optim.lr 1e-4 --optim.weight_decay 1"},
      {"schedulefree", " --optim.name adamw_schedulefree"},
      {"ademamix", " --optim.name ademamix --optim.ademamix_warmup 6"},
      {"muon", " --optim.name muon --optim.lr 0.02"}};
  for (const auto& [label, extra] : optimizers) {
    SCOPED_TRACE(label);
    const std::string ref = "ref_" + label, chain = "chain_" + label;
    CommandResult r = testing::run_command(testing::ledgerlm_binary() + " train" +
                                           flags(ref, 1, 0, 6) + extra + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_command(train(4, flags(chain, 4, 3, 2) + extra) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_command(train(2, resume(chain, 2, 1, 4)) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_command(testing::ledgerlm_binary() + " train" + resume(chain, 1, 0, 6) +
                             " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<double> got = testing::run_losses(dir(chain));
    const std::vector<double> want = testing::run_losses(dir(ref));
    ASSERT_EQ(got.size(), 6u);
    ASSERT_EQ(want.size(), 6u);
    for (size_t s = 0; s < want.size(); ++s)
      EXPECT_NEAR(got[s], want[s], 1e-7 * want[s]) << "step " << s + 1;
    expect_tensors_close(dir(chain), dir(ref), 1e-3, false);
  }
}

// AdEMAMix's warmup defaults to the run's length: a resume that changes the length would make
// alpha and beta3 jump, and is refused with the fix in the message.
TEST_F(DistResume, AdEMAMixRefusesAChangedRunLength) {
  LEDGERLM_REQUIRE_MPI();
  CommandResult r = testing::run_command(testing::ledgerlm_binary() + " train" +
                                         flags("ema", 1, 0, 3) + " --optim.name ademamix 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command(testing::ledgerlm_binary() + " train" + resume("ema", 1, 0, 6) +
                           " 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("set optim.ademamix_warmup = 3 to continue it"), std::string::npos)
      << r.output;
  r = testing::run_command(testing::ledgerlm_binary() + " train" + resume("ema", 1, 0, 6) +
                           " --optim.ademamix_warmup 3 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// Same world and stage: stopping and resuming changes nothing, bit for bit.
TEST_F(DistResume, SameWorldAndStageResumeIsBitwise) {
  LEDGERLM_REQUIRE_MPI();
  // The sanitizer pass leak-checks these ranks (tests/support/dist_test_support.h): a sharded
  // checkpoint written, a run resumed from it.
  testing::RankLeakCheck leak_check;
  for (int stage : {1, 3}) {
    const std::string whole = "whole" + std::to_string(stage),
                      split = "split" + std::to_string(stage);
    CommandResult r = testing::run_command(train(2, flags(whole, 2, stage, 6)) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_command(train(2, flags(split, 2, stage, 3)) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = testing::run_command(train(2, resume(split, 2, stage, 6)) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::vector<double> a = testing::run_losses(dir(split)),
                              b = testing::run_losses(dir(whole));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0) << "stage " << stage;
    expect_tensors_close(dir(split), dir(whole), 0.0, true);
  }
}

// STOP file and SIGUSR1: both ranks stop after the same step, save, exit 75 (stopped, resumable;
// mpirun passes it on); the run resumes.
TEST_F(DistResume, StopFileAndSigusr1StopEveryRankWithACheckpoint) {
  LEDGERLM_REQUIRE_MPI();
  for (const char* how : {"stop_file", "sigusr1"}) {
    const std::string name = std::string("stop_") + how;
    testing::Background job =
        testing::start_background(train(2, flags(name, 2, 2, 100000)), out_ + "/bg_" + name);
    ASSERT_GT(job.pid, 0);
    ASSERT_TRUE(testing::wait_for_step(dir(name), 3, 60)) << job.log();
    if (std::string(how) == "stop_file")
      testing::write_file(dir(name) + "/STOP", "");
    else
      job.signal("USR1");  // mpirun forwards it to every rank
    ASSERT_EQ(job.wait(60), 75) << job.log();
    const std::string log = job.log();
    EXPECT_NE(log.find("stopped by"), std::string::npos) << log;
    EXPECT_NE(log.find("resume with: mpirun -np 2 ledgerlm train --config"), std::string::npos)
        << log;
    const std::vector<double> losses = testing::run_losses(dir(name));
    const CheckpointReader ckpt = CheckpointReader::open(checkpoint_resolve(dir(name)));
    EXPECT_EQ(ckpt.step(), static_cast<int64_t>(losses.size())) << "saved at the stop step";
    EXPECT_FALSE(fs::exists(dir(name) + "/STOP")) << "the STOP file is cleared";
    const CommandResult r = testing::run_command(
        train(2, resume(name, 2, 2, static_cast<int>(losses.size()) + 2)) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(testing::run_losses(dir(name)).size(), losses.size() + 2);
  }
}

// Ctrl-C on mpirun: the ranks get SIGTERM, then SIGKILL about a second later, possibly in the
// middle of a save. The last complete checkpoint stays intact and loads, the notice printed on
// SIGTERM names the resume command, and resuming works.
TEST_F(DistResume, CtrlCOnMpirunLeavesTheLastCheckpointIntact) {
  LEDGERLM_REQUIRE_MPI();
  const std::string name = "ctrl_c";
  testing::Background job = testing::start_background(
      train(2, flags(name, 2, 3, 100000) + " --ckpt.interval 2"), out_ + "/bg_" + name);
  ASSERT_GT(job.pid, 0);
  ASSERT_TRUE(testing::wait_for_step(dir(name), 5, 60)) << job.log();
  job.signal("INT");
  const int rc = job.wait(60);
  ASSERT_NE(rc, -1) << "mpirun did not end after Ctrl-C: " << job.log();
  const std::string log = job.log();
  EXPECT_NE(log.find("resume from the last complete checkpoint with: mpirun -np 2 ledgerlm train"),
            std::string::npos)
      << log;
  const CheckpointReader ckpt = CheckpointReader::open(checkpoint_resolve(dir(name)));
  ckpt.verify_all();
  EXPECT_GE(ckpt.step(), 2);
  const CommandResult r = testing::run_command(
      train(2, resume(name, 2, 3, static_cast<int>(ckpt.step()) + 2)) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace ledgerlm
