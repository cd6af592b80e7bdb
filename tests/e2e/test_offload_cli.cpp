// optim.offload from the command line: host offload refused on the CPU backend in one line; host
// and disk offload on the guard backend (a device stand-in whose memory host code cannot touch)
// bit-identical to no offload, checkpoints included; a write failing as a full disk does in the
// middle of a streamed step (one line, non-zero exit, the last checkpoint intact and resumed to
// the uninterrupted run's weights) and a real full filesystem at start-up, for the state files
// and for the bandwidth probe (no run directory left behind either way); a byte of a state file
// changed on the device (one line naming the file); two runs of one name in two out_dirs
// sharing optim.offload_dir at the same time (each as alone); the ledger's disk rows (files
// against the planner within 1%, nothing left in the page cache); `memory --offload`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"
#include "tests/support/tmpfs_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::run_command;

std::string data_dir() {
  static const std::string dir = [] {
    std::string text;
    for (int i = 0; i < 300; ++i)
      text += "In the beginning was the word, line " + std::to_string(i) + ".\n";
    return testing::resume_prepare_corpus("ledgerlm_offload_", text);
  }();
  return dir;
}

CommandResult train(const std::string& out, const std::string& name, const std::string& flags,
                    const std::string& env = "") {
  return run_command(env + " " + testing::ledgerlm_binary() + " train" +
                     testing::resume_tiny_flags(data_dir(), out, name) + flags);
}

bool same_file(const std::string& a, const std::string& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  const std::string sa((std::istreambuf_iterator<char>(fa)), {});
  const std::string sb((std::istreambuf_iterator<char>(fb)), {});
  return !sa.empty() && sa == sb;
}

int error_lines(const std::string& output) {
  int n = 0;
  for (size_t at = output.find("error:"); at != std::string::npos;
       at = output.find("error:", at + 1))
    ++n;
  return n;
}

const char* kSmallArena = " --optim.offload_staging_mb 0.0625";

TEST(OffloadCli, HostIsRefusedOnTheCpuBackendInOneLine) {
  const std::string out = testing::make_temp_dir("offload_runs_");
  const CommandResult r = train(out, "host", " --train.max_steps 2 --optim.offload host");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("optim.offload = host: the cpu backend"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/host")) << "a refused start leaves no run directory";
}

// The guard backend: the optimizer runs on a host CPU backend beside it, reading gradients copied
// down and writing the compute copy up, exactly as on a GPU.
TEST(OffloadCli, HostAndDiskOnTheGuardBackendAreBitIdentical) {
  const std::string out = testing::make_temp_dir("offload_runs_");
  const std::string env = "LEDGERLM_TEST_GUARD_BACKEND=1";
  const std::string flags =
      " --train.max_steps 6 --ckpt.interval 3 --precision.params bf16 --optim.name lamb";
  for (const char* mode : {"none", "host", "disk"}) {
    const CommandResult r = train(out, mode, flags + " --optim.offload " + mode + kSmallArena, env);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  for (const char* mode : {"host", "disk"}) {
    EXPECT_TRUE(same_file(out + "/none/model.safetensors", out + "/" + mode + "/model.safetensors"))
        << mode;
    EXPECT_TRUE(same_file(out + "/none/ckpt/step_000006/optimizer.safetensors",
                          out + "/" + mode + "/ckpt/step_000006/optimizer.safetensors"))
        << mode;
  }
}

TEST(OffloadCli, AFullDiskInAStreamedStepStopsInOneLineAndTheCheckpointResumes) {
  const std::string out = testing::make_temp_dir("offload_runs_");
  const std::string flags =
      " --train.max_steps 8 --ckpt.interval 4 --optim.offload disk --precision.params bf16" +
      std::string(kSmallArena);
  CommandResult r = train(out, "full", flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // How many writes a run of 8 steps makes; the failure is set halfway between the checkpoint at
  // step 4 and the end, inside a step's write-behind.
  std::ifstream in(out + "/full/ledger.json");
  const nlohmann::json ledger = nlohmann::json::parse(in);
  const auto writes =
      static_cast<int64_t>(ledger["measured"]["disk"]["io"]["writes"].get<double>());
  ASSERT_GT(writes, 16);
  const std::string fail_at = std::to_string(writes * 3 / 4);
  r = train(out, "broken", flags, "LEDGERLM_OFFLOAD_TEST_FAIL_WRITE=" + fail_at);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("last checkpoint is intact"), std::string::npos) << r.output;
  ASSERT_TRUE(fs::exists(out + "/broken/ckpt/step_000004/meta.json")) << r.output;
  EXPECT_FALSE(fs::exists(out + "/broken/model.safetensors"));
  // Space back: the run resumes from its last checkpoint and ends where the other one did.
  r = train(out, "broken", flags + " --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(same_file(out + "/full/model.safetensors", out + "/broken/model.safetensors"));
}

TEST(OffloadCli, ARealFullFilesystemIsRefusedAtStartUp) {
  testing::Tmpfs small(64 << 10);
  if (!small.ok()) GTEST_SKIP() << small.why();
  const std::string out = testing::make_temp_dir("offload_runs_");
  const CommandResult r = train(out, "nospace",
                                " --train.max_steps 2 --optim.offload disk --optim.offload_dir " +
                                    small.path() + kSmallArena);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("optim.offload_dir"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/nospace"));
}

// The state files fit, the probe of the device's bandwidth (8 MiB at least) does not: the start
// fails there, after the state was built, and must leave no run directory (it once did, so the
// same command was refused afterwards as a run that exists).
TEST(OffloadCli, AProbeWithoutRoomFailsTheStartAndLeavesNoRunDirectory) {
  testing::Tmpfs small(4 << 20);
  if (!small.ok()) GTEST_SKIP() << small.why();
  const std::string out = testing::make_temp_dir("offload_runs_");
  const std::string flags =
      " --train.max_steps 2 --optim.offload disk --optim.offload_dir " + small.path() + kSmallArena;
  for (int attempt = 0; attempt < 2; ++attempt) {  // the second: the same command again
    const CommandResult r = train(out, "noprobe", flags);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_EQ(error_lines(r.output), 1) << r.output;
    EXPECT_NE(r.output.find("bandwidth_probe"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
    EXPECT_EQ(r.output.find("already exists"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(out + "/noprobe")) << "attempt " << attempt << ": " << r.output;
  }
  EXPECT_TRUE(fs::is_empty(small.path())) << "the state files go with the failed start";
}

// A bit of a state file flipped on the device after it was written (test hook): the next read of
// it fails its checksum, and the run stops in one line naming the file.
TEST(OffloadCli, AFlippedByteInAStateFileIsOneErrorNamingTheFile) {
  const std::string out = testing::make_temp_dir("offload_runs_");
  const std::string flags = " --train.max_steps 6 --optim.offload disk --precision.params bf16" +
                            std::string(kSmallArena);
  // The 40th write is in the second step (a step writes each state range once: more than 40).
  const CommandResult r = train(out, "flipped", flags, "LEDGERLM_OFFLOAD_TEST_DAMAGE_WRITE=40");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(error_lines(r.output), 1) << r.output;
  EXPECT_NE(r.output.find(out + "/flipped/offload/rank0."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(".bin' is damaged: bytes ["), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out + "/flipped/model.safetensors"));
}

// Two runs named alike in two out_dirs, one optim.offload_dir, trained at the same time (a slow
// device keeps both in their steps together): each ends with the weights of the same run trained
// alone, bit for bit (the runs are deterministic). They once shared OFFLOAD_DIR/NAME/rank0.*.bin
// and trained on each other's optimizer state.
TEST(OffloadCli, RunsOfOneNameInTwoOutDirsShareAnOffloadDirAsIfAlone) {
  const std::string root = testing::make_temp_dir("offload_runs_");
  const std::string shared = root + "/offload";
  const std::string flags = " --train.max_steps 6 --optim.offload disk --precision.params bf16" +
                            std::string(kSmallArena) + " --optim.offload_dir " + shared;
  const std::string slow = "LEDGERLM_OFFLOAD_TEST_READ_DELAY_US=1000";
  const CommandResult alone = train(root + "/alone", "same", flags, slow);
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const std::string cmd_a = slow + " " + testing::ledgerlm_binary() + " train" +
                            testing::resume_tiny_flags(data_dir(), root + "/a", "same") + flags;
  const std::string cmd_b = slow + " " + testing::ledgerlm_binary() + " train" +
                            testing::resume_tiny_flags(data_dir(), root + "/b", "same") + flags;
  const CommandResult both =
      run_command("(" + cmd_a + " > " + root + "/a.log 2>&1; echo $? > " + root + "/a.rc) & " +
                  cmd_b + " > " + root + "/b.log 2>&1; echo $? > " + root + "/b.rc; wait");
  ASSERT_EQ(both.exit_code, 0) << both.output;
  for (const char* run : {"a", "b"}) {
    std::ifstream rc(root + "/" + run + ".rc"), log(root + "/" + run + ".log");
    const std::string text((std::istreambuf_iterator<char>(log)), {});
    int code = -1;
    rc >> code;
    EXPECT_EQ(code, 0) << run << ": " << text;
    EXPECT_TRUE(same_file(root + "/alone/same/model.safetensors",
                          root + "/" + run + "/same/model.safetensors"))
        << run << " differs from the run alone: " << text;
  }
  // Each had a directory of its own there, removed when it ended.
  EXPECT_TRUE(!fs::exists(shared) || fs::is_empty(shared));
}

// The files against the planner (1%: the bytes are exact; allocation rounds to the filesystem's
// blocks), nothing of them in the page cache, the staging arena measured as predicted.
TEST(OffloadCli, TheLedgerMeasuresTheFilesAndTheStaging) {
  const std::string out = testing::make_temp_dir("offload_runs_");
  const CommandResult r =
      train(out, "ledger", " --train.max_steps 3 --optim.offload disk --precision.params bf16");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("offload: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on disk (MB)"), std::string::npos) << r.output;
  std::ifstream in(out + "/ledger/ledger.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  const nlohmann::json& disk = j["measured"]["disk"];
  for (const char* tag : {"master", "optim.m", "optim.v"}) {
    ASSERT_TRUE(disk.contains(tag)) << disk.dump();
    EXPECT_LE(std::fabs(disk[tag]["error"].get<double>()), 0.01) << tag << ": " << disk.dump();
    EXPECT_EQ(disk[tag]["page_cached"].get<int64_t>(), 0) << tag;
  }
  const nlohmann::json& staging = j["measured"]["offload.staging"];
  EXPECT_EQ(staging["peak"].get<int64_t>(), staging["predicted"].get<int64_t>());
  EXPECT_GT(j["measured"]["disk"]["bandwidth"]["read_mb_s"].get<double>(), 0.0);
  EXPECT_FALSE(fs::exists(out + "/ledger/offload/rank0.master.bin")) << "scratch files remain";
}

TEST(OffloadCli, MemoryPredictsWhereTheBytesLive) {
  const CommandResult r = run_command(testing::ledgerlm_binary() +
                                      " memory --params 124e6 --optim adamw --param-dtype bf16 "
                                      "--offload disk");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("(disk)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on disk per rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("offload.staging"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ledgerlm
