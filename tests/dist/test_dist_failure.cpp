// Failures of a job of several ranks end the whole job with one clear error in bounded time —
// never a hang — and leave the last checkpoint intact:
//   - a rank killed with SIGKILL mid-run (test hook LEDGERLM_TEST_KILL_AT=RANK:STEP): mpirun
//     ends every rank; measured well under the 30 s bound; the last checkpoint resumes;
//   - data missing on one rank only: one "ledgerlm: error: rank 1: ..." line, exit 1, no run
//     directory created;
//   - a config that differs between ranks: one line naming the key and both values;
//   - a checkpoint save failing mid-run (a full disk, tests/support/tmpfs_test_support.h): one
//     line with one rank prefix (it was a line per rank, "rank 1: rank 0: ...");
//   - optim.offload = disk with two ranks on one host: every start succeeds (the ranks once
//     probed the device through one scratch file and failed most starts), with the weights of
//     optim.offload = none; a start that fails in that probe (no room for it) is one line and
//     leaves no run directory, so the same command is not refused afterwards as an existing run.
// Ranks get different arguments through mpirun's MPMD form (`-np 1 A : -np 1 B`).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/tmpfs_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

class DistFailure : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::mpirun_path().empty()) return;
    std::string text;
    for (int i = 0; i < 300; ++i) text += "Let there be light, line " + std::to_string(i) + ".\n";
    data_ = testing::resume_prepare_corpus("ledgerlm_dist_fail_", text);
    out_ = fs::path(data_).parent_path().string() + "/runs";
  }
  static std::string flags(const std::string& name, const std::string& data) {
    return testing::resume_tiny_flags(data, out_, name) + " --train.max_steps 40" +
           " --dist.zero 2 --ckpt.interval 2";
  }
  // Two ranks with their own argument lists.
  static std::string mpmd(const std::string& rank0, const std::string& rank1) {
    const std::string bin = testing::ledgerlm_binary() + " train";
    return testing::mpirun_prefix(1) + bin + rank0 + " : -np 1 " + bin + rank1 + " 2>&1";
  }
  static int count(const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  }
  static std::string data_, out_;
};
std::string DistFailure::data_, DistFailure::out_;

TEST_F(DistFailure, KilledRankEndsTheJobAndTheLastCheckpointResumes) {
  LEDGERLM_REQUIRE_MPI();
  const auto t0 = std::chrono::steady_clock::now();
  CommandResult r = testing::run_command("LEDGERLM_TEST_KILL_AT=1:7 " + testing::mpirun_prefix(2) +
                                         "-x LEDGERLM_TEST_KILL_AT " + testing::ledgerlm_binary() +
                                         " train" + flags("killed", data_) + " 2>&1");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_LT(seconds, 30.0) << "the job must end within the bound, not hang";
  std::printf("job ended %.1f s after start (rank 1 killed at step 7)\n", seconds);
  EXPECT_NE(r.output.find("signal 9"), std::string::npos) << r.output;
  const CheckpointReader ckpt = CheckpointReader::open(checkpoint_resolve(out_ + "/killed"));
  ckpt.verify_all();
  EXPECT_EQ(ckpt.step(), 6) << "the last checkpoint before the death";
  r = testing::run_command(testing::mpirun_prefix(2) + testing::ledgerlm_binary() +
                           " train --config " + out_ + "/killed/config.toml --resume auto" +
                           " --train.max_steps 8 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(DistFailure, DataMissingOnOneRankIsOneErrorOnEvery) {
  LEDGERLM_REQUIRE_MPI();
  const CommandResult r =
      testing::run_command(mpmd(flags("missing", data_), flags("missing", data_ + "_nowhere")));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count(r.output, "ledgerlm: error:"), 1) << r.output;
  EXPECT_NE(r.output.find("ledgerlm: error: rank 1: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("_nowhere"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out_ + "/missing")) << "nothing is created on a failed start";
}

TEST_F(DistFailure, ConfigDifferingBetweenRanksNamesTheKey) {
  LEDGERLM_REQUIRE_MPI();
  const CommandResult r = testing::run_command(
      mpmd(flags("mismatch", data_), flags("mismatch", data_) + " --optim.lr 0.01"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_EQ(count(r.output, "ledgerlm: error:"), 1) << r.output;
  EXPECT_NE(r.output.find("rank 1's resolved config differs from rank 0's: 'optim.lr = 0.01'"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out_ + "/mismatch"));
}

// Rank 0 cannot create the checkpoint's files (the disk is full): every rank learns it from the
// save's agreement, and the job reports it once, naming rank 0 once.
TEST_F(DistFailure, CheckpointSaveFailureIsOneLineWithOneRankPrefix) {
  LEDGERLM_REQUIRE_MPI();
  testing::Tmpfs disk(16 << 20);
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  const std::string bin = testing::ledgerlm_binary();
  const std::string base =
      testing::resume_tiny_flags(data_, disk.path(), "full") + " --dist.zero 1 --ckpt.interval 2";
  CommandResult r = testing::run_command(testing::mpirun_prefix(2) + bin + " train" + base +
                                         " --train.max_steps 2 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  disk.fill(2);
  r = testing::run_command(testing::mpirun_prefix(2) + bin + " train --config " + disk.path() +
                           "/full/config.toml --resume auto --train.max_steps 12 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "ledgerlm: error:"), 1) << r.output;
  EXPECT_EQ(count(r.output, "rank 0: "), 1) << r.output;
  EXPECT_EQ(count(r.output, "rank 1: "), 0) << r.output;
  EXPECT_NE(r.output.find("not saved: rank 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
}

std::string file_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// The state on a tmpfs: the probe is then a few milliseconds, the ranks' start skew as long, and
// the old shared probe file failed about one start in three here (one in five on ext4 with a
// 40 MB state); twelve starts of two ranks.
TEST_F(DistFailure, OffloadDiskStartsOnTwoRanksOfOneHostEveryTime) {
  LEDGERLM_REQUIRE_MPI();
  testing::Tmpfs device(64 << 20);
  if (!device.ok()) GTEST_SKIP() << device.why();
  const auto flags = [&](const std::string& name, const std::string& offload) {
    return testing::resume_tiny_flags(data_, out_, name) +
           " --train.max_steps 3 --dist.zero 1 --optim.offload " + offload +
           " --optim.offload_dir " + device.path();
  };
  std::vector<std::string> runs = {flags("offload_none", "none")};
  for (int i = 0; i < 12; ++i) runs.push_back(flags("offload_disk" + std::to_string(i), "disk"));
  const CommandResult r = testing::run_many(2, runs, out_ + "/lists");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string want = file_text(out_ + "/offload_none/model.safetensors");
  ASSERT_FALSE(want.empty());
  for (int i = 0; i < 12; ++i) {
    const std::string name = "offload_disk" + std::to_string(i);
    EXPECT_EQ(file_text(out_ + "/" + name + "/model.safetensors"), want)
        << name << ": the paged state gives other weights than RAM";
  }
}

TEST_F(DistFailure, AFailedOffloadStartLeavesNoRunDirectoryToRefuseTheNextOne) {
  LEDGERLM_REQUIRE_MPI();
  testing::Tmpfs small(4 << 20);  // room for both ranks' state files, not for an 8 MiB probe
  if (!small.ok()) GTEST_SKIP() << small.why();
  const std::string command = testing::mpirun_prefix(2) + testing::ledgerlm_binary() + " train" +
                              testing::resume_tiny_flags(data_, out_, "noprobe") +
                              " --train.max_steps 3 --optim.offload disk --optim.offload_dir " +
                              small.path() + " --optim.offload_staging_mb 0.0625 2>&1";
  for (int attempt = 0; attempt < 2; ++attempt) {
    const CommandResult r = testing::run_command(command);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_EQ(count(r.output, "ledgerlm: error:"), 1) << r.output;
    EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("already exists"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out_ + "/noprobe")) << "attempt " << attempt << ": " << r.output;
  }
}

}  // namespace
}  // namespace ledgerlm
