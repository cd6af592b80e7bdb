// A full disk, for real: a small tmpfs (tests/support/tmpfs_test_support.h; the tests skip, saying
// why, where it cannot be mounted) filled at each stage of a checkpoint save through the save's
// stage hook, so the writes that follow fail with ENOSPC; and `ledgerlm train` with its run
// directory on a filled tmpfs. Before: a failed save left its partial temporary directory (keeping
// the disk full) and failed metrics writes were ignored (metrics.jsonl stopped mid-record while
// training went on). Now: the save fails with one line, leaves no temporary and the disk no fuller,
// the previous checkpoint stays `latest` and resumes; a failed metrics write stops the run with one
// line and leaves the log ending on a complete record; after space is freed, `--resume auto`
// finishes bit-identical to an uninterrupted run.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "model/base/check.h"
#include "tests/support/process_test_support.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"
#include "tests/support/tmpfs_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<CkptPiece> pieces(const std::vector<float>& w, const std::vector<float>& m) {
  return {{"model",
           "w",
           DType::kF32,
           {static_cast<int64_t>(w.size())},
           0,
           static_cast<int64_t>(w.size()),
           w.data(),
           {}},
          {"optimizer",
           "w.m",
           DType::kF32,
           {static_cast<int64_t>(m.size())},
           0,
           static_cast<int64_t>(m.size()),
           m.data(),
           {}}};
}

class SaveOnFullDisk : public ::testing::TestWithParam<const char*> {};

TEST_P(SaveOnFullDisk, FailsCleanlyAndThePreviousCheckpointStays) {
  testing::Tmpfs disk(4 << 20);
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  const std::string root = disk.path() + "/ckpt";
  const std::vector<float> w1(60000, 1.0f), w2(60000, 2.0f);  // 240 KB per file
  checkpoint_save(root, 1, {{"trainer", {{"step", 1}}}}, pieces(w1, w1));
  const int64_t free_before = disk.free_bytes();
  CkptSaveOptions o;
  const std::string stage = GetParam();
  o.on_stage = [&](const std::string& at) {
    if (at == stage) disk.fill(0);  // every write from here on fails with ENOSPC
  };
  std::string err;
  try {
    checkpoint_save(root, 2, {{"trainer", {{"step", 2}}}}, pieces(w2, w2), o);
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << "'" << err << "'";
  EXPECT_NE(err.find("step_000002 not saved"), std::string::npos) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  disk.unfill();
  EXPECT_EQ(disk.free_bytes(), free_before) << "the failed save left data behind";
  EXPECT_EQ(entries(root), (std::vector<std::string>{"latest", "step_000001"}));
  EXPECT_EQ(checkpoint_latest(root), root + "/step_000001");
  CheckpointReader r = CheckpointReader::open(root + "/step_000001");
  r.verify_all();
  EXPECT_EQ(r.read_f32("model", "w", {60000}), w1);
  // With the space back, the same save succeeds.
  checkpoint_save(root, 2, {{"trainer", {{"step", 2}}}}, pieces(w2, w2));
  EXPECT_EQ(checkpoint_latest(root), root + "/step_000002");
}

INSTANTIATE_TEST_SUITE_P(EveryStage, SaveOnFullDisk,
                         ::testing::Values("tensors", "meta", "rename", "latest"));

const testing::ResumeCorpus kCorpus{"disk_full_data_", [] {
                                      std::string text;
                                      for (int i = 0; i < 4000; ++i)
                                        text += (i % 8 == 7) ? "disk full.\n" : "no space left ";
                                      return text;
                                    }};

// The tiny model with a constant LR, so a budget changed on resume does not change the curve.
std::string flags(const std::string& out, const std::string& name) {
  return kCorpus.flags(out, name) + " --optim.schedule constant";
}

testing::CommandResult train(const std::string& args) {
  return run_command(testing::ledgerlm_binary() + " train" + args);
}

// One error line naming the disk full and holding one of `needles` (any one: which log hits the
// full disk first varies), not testing::expect_one_error_line, which wants every needle.
void expect_disk_full_error(const testing::CommandResult& r,
                            const std::vector<std::string>& needles) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("ledgerlm: error: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ledgerlm: error: ", at + 1), std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  EXPECT_TRUE(std::any_of(needles.begin(), needles.end(), [&](const std::string& n) {
    return line.find(n) != std::string::npos;
  })) << line;
  EXPECT_NE(line.find("No space left on device"), std::string::npos) << line;
}
void expect_disk_full_error(const testing::CommandResult& r, const std::string& needle) {
  expect_disk_full_error(r, std::vector<std::string>{needle});
}

void expect_same_run(const std::string& ref, const std::string& got, int64_t steps) {
  const auto a = testing::clean_losses(ref), b = testing::clean_losses(got);
  ASSERT_EQ(a.size(), static_cast<size_t>(steps));
  EXPECT_EQ(a, b);
  EXPECT_TRUE(testing::read_file(ref + "/model.safetensors") ==
              testing::read_file(got + "/model.safetensors"));
  EXPECT_TRUE(testing::temporaries(got).empty());
}

// The logs' writes fail first (no checkpoint is due): the run stops at once with one line naming
// whichever log hit the full disk first (metrics.jsonl or the TensorBoard event file, written
// alike), the log ends on a complete record, and freeing space lets the run finish as if nothing
// happened.
TEST(TrainOnFullDisk, MetricsWriteFailureStopsTheRun) {
  testing::Tmpfs disk(16 << 20);
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  const std::string ref_out = testing::make_temp_dir("disk_full_ref_");
  ASSERT_EQ(train(flags(ref_out, "ref") + " --train.max_steps 60").exit_code, 0);
  const std::string run = disk.path() + "/run";
  auto first = train(flags(disk.path(), "run") + " --train.max_steps 6");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  disk.fill(1);
  const std::string resume = " --config " + run + "/config.toml --resume auto --train.max_steps 60";
  auto full = train(resume);
  expect_disk_full_error(full, {"cannot write metrics log '" + run + "/metrics.jsonl'",
                                "cannot write TensorBoard event file '" + run + "/events.out."});
  const auto partial = testing::clean_losses(run);  // parses line by line, ends on a newline
  // The full disk may refuse the failed run's summary too: the error above stays the only line,
  // and whatever summary.json exists is a whole one saying "failed".
  if (fs::exists(run + "/summary.json")) {
    EXPECT_EQ(nlohmann::json::parse(testing::read_file(run + "/summary.json"))["status"], "failed");
  }
  EXPECT_GT(partial.rbegin()->first, 6);
  EXPECT_LT(partial.rbegin()->first, 60);
  disk.unfill();
  auto again = train(resume);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_run(ref_out + "/ref", run, 60);
}

// A checkpoint save fails (the log still fits): one line, no temporary, `latest` still the
// previous checkpoint, which resumes once there is room.
TEST(TrainOnFullDisk, CheckpointSaveFailureKeepsThePrevious) {
  testing::Tmpfs disk(16 << 20);
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  const std::string ref_out = testing::make_temp_dir("disk_full_ref_");
  ASSERT_EQ(train(flags(ref_out, "ref") + " --train.max_steps 12 --ckpt.interval 2").exit_code, 0);
  const std::string run = disk.path() + "/run";
  auto first = train(flags(disk.path(), "run") + " --train.max_steps 6 --ckpt.interval 2");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  disk.fill(2);
  const std::string resume = " --config " + run + "/config.toml --resume auto --train.max_steps 12";
  auto full = train(resume);
  expect_disk_full_error(full, "checkpoint " + run + "/ckpt/step_000008 not saved");
  // The failed save gave its room back, so the run's end is recorded: summary.json says
  // "failed" with the error line (before, there was none: "running, or killed").
  const auto summary = nlohmann::json::parse(testing::read_file(run + "/summary.json"));
  EXPECT_EQ(summary["status"], "failed");
  EXPECT_NE(summary["failed"].get<std::string>().find("step_000008 not saved"), std::string::npos)
      << summary["failed"];
  EXPECT_TRUE(testing::temporaries(run).empty()) << testing::temporaries(run).front();
  EXPECT_EQ(checkpoint_latest(run + "/ckpt"), run + "/ckpt/step_000006");
  testing::clean_losses(run);
  disk.unfill();
  auto again = train(resume);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_run(ref_out + "/ref", run, 12);
}

// An export onto a full disk fails with one line and leaves neither --out nor its temporary.
TEST(TrainOnFullDisk, ExportFailsCleanly) {
  testing::Tmpfs disk(4 << 20);
  if (!disk.ok()) GTEST_SKIP() << disk.why();
  const std::string out = testing::make_temp_dir("disk_full_export_");
  ASSERT_EQ(train(flags(out, "run") + " --train.max_steps 1").exit_code, 0);
  disk.fill(1);
  auto r = run_command(testing::ledgerlm_binary() + " export --run " + out + "/run --out " +
                       disk.path() + "/hf");
  expect_disk_full_error(r, "cannot write");
  disk.unfill();
  EXPECT_EQ(entries(disk.path()), std::vector<std::string>{}) << "export left files behind";
}

}  // namespace
}  // namespace ledgerlm
