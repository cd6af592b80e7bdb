// TensorBoard event files, read back by an independent reader (tests/tools/tb_events_read.py:
// its own CRC-32C and Google's protobuf parser against TensorBoard's Event schema):
//   - every figure a run's metrics.jsonl holds for TensorBoard is in the event file, at its step,
//     equal to the record's value rounded to float32 (simple_value is a float: exact equality);
//   - nothing else is there, and the first record is the file_version "brain.Event:2";
//   - resuming from an earlier checkpoint drops the later events, as metrics.jsonl is cut back,
//     so every tag's steps are 1..N once each; a torn last record is dropped on resume;
//   - train.tensorboard = false writes no event file.
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>

#include "tests/support/run_files_test_support.h"
#include "train/run/tensorboard.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::run_command;
using testing::RunFilesTest;

// What the README promises per record kind: metrics.jsonl field -> tag (mem: nested fields).
const std::vector<std::pair<std::string, std::string>> kStepTags = {
    {"loss", "train/loss"},
    {"lr", "train/lr"},
    {"grad_norm", "train/grad_norm"},
    {"tokens_per_s", "train/tokens_per_s"},
    {"step_ms", "train/step_ms"},
    {"optim_ms", "train/optim_ms"},
    {"comm_ms", "train/comm_ms"},
    {"loss_scale", "train/loss_scale"},
    {"skipped_steps", "train/skipped_steps"},
    {"tokens", "train/tokens"}};

// (step, tag) -> value, from the metrics log: the figures the event file must hold.
std::map<std::pair<int64_t, std::string>, float> expected_scalars(const std::vector<json>& log) {
  std::map<std::pair<int64_t, std::string>, float> out;
  for (const json& rec : log) {
    if (!rec.contains("step")) continue;
    const int64_t step = rec["step"].get<int64_t>();
    auto put = [&](const json& v, const std::string& tag) {
      if (v.is_number()) out[{step, tag}] = v.get<float>();
    };
    if (rec.contains("loss"))
      for (const auto& [key, tag] : kStepTags) put(rec[key], tag);
    if (rec.contains("val_loss")) {
      put(rec["val_loss"], "val/loss");
      put(rec["val_bpb"], "val/bpb");
      put(rec["val_ppl"], "val/ppl");
    }
    if (rec.contains("ckpt")) {
      put(rec["ckpt_save_s"], "ckpt/save_s");
      put(rec["ckpt_bytes"], "ckpt/bytes");
    }
    if (rec.contains("mem")) {
      put(rec["mem"]["total"]["current"], "mem/tracked_bytes");
      put(rec["mem"]["total"]["peak"], "mem/tracked_peak_bytes");
      put(rec["mem"]["process"]["hwm"], "mem/rss_hwm_bytes");
    }
  }
  return out;
}

json read_events(const std::string& run_dir) {
  const std::vector<std::string> files = tb_event_files(run_dir);
  EXPECT_EQ(files.size(), 1u) << run_dir;
  if (files.empty()) return json();
  const CommandResult r = run_command(testing::python3() + " " + testing::source_dir() +
                                      "/tests/tools/tb_events_read.py " + files.front());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(r.output) : json();
}

// Every expected figure once, equal as float32, and nothing besides; per tag the steps rise.
void expect_events_match_log(const json& ev, const std::vector<json>& log) {
  ASSERT_TRUE(ev.is_object());
  EXPECT_EQ(ev["file_version"], "brain.Event:2");
  const auto want = expected_scalars(log);
  std::map<std::pair<int64_t, std::string>, float> got;
  std::map<std::string, int64_t> last_step;
  for (const json& e : ev["events"]) {
    const int64_t step = e["step"].get<int64_t>();
    for (const auto& [tag, value] : e["scalars"].items()) {
      EXPECT_TRUE(got.emplace(std::make_pair(step, tag), value.get<float>()).second)
          << "tag " << tag << " twice at step " << step;
      EXPECT_GT(step, last_step.count(tag) ? last_step[tag] : -1) << tag;
      last_step[tag] = step;
    }
  }
  EXPECT_EQ(got.size(), want.size());
  for (const auto& [key, value] : want) {
    const auto it = got.find(key);
    ASSERT_NE(it, got.end()) << "missing " << key.second << " at step " << key.first;
    EXPECT_EQ(it->second, value) << key.second << " at step " << key.first;
  }
}

class TensorBoardTest : public RunFilesTest {};

TEST_F(TensorBoardTest, EventFileHoldsEveryFigureOfTheLog) {
  const double t0 = static_cast<double>(std::time(nullptr));
  const CommandResult r = train("tb", "--train.max_steps 12 --ckpt.interval 6");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const double t1 = static_cast<double>(std::time(nullptr)) + 1;
  const json ev = read_events(run_dir("tb"));
  expect_events_match_log(ev, metrics("tb"));
  // Each kind of record is there: 12 steps, 3 evaluations, 2 checkpoint saves, memory figures.
  std::map<std::string, int> per_tag;
  for (const json& e : ev["events"]) {
    EXPECT_GE(e["wall_time"].get<double>(), t0 - 1);
    EXPECT_LE(e["wall_time"].get<double>(), t1);
    for (const auto& [tag, v] : e["scalars"].items()) ++per_tag[tag];
  }
  EXPECT_EQ(per_tag["train/loss"], 12);
  EXPECT_EQ(per_tag["val/bpb"], 3);
  EXPECT_EQ(per_tag["ckpt/bytes"], 2);
  EXPECT_GE(per_tag["mem/tracked_peak_bytes"], 3);  // steps 1, 5, 10, 12
}

// Resumed from step 6 of a run that reached 12: the event file is cut back with the log and the
// resumed steps appear once; a half-written record at the end is dropped at the next resume.
TEST_F(TensorBoardTest, ResumeCutsEventsBackLikeTheLog) {
  ASSERT_EQ(train("tb_res", "--train.max_steps 12 --ckpt.interval 6 --ckpt.keep 5").exit_code, 0);
  CommandResult r =
      train("tb_res", "--train.max_steps 12 --resume " + run_dir("tb_res") + "/ckpt/step_000006");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json ev = read_events(run_dir("tb_res"));
  expect_events_match_log(ev, metrics("tb_res"));
  std::set<int64_t> loss_steps;
  for (const json& e : ev["events"])
    if (e["scalars"].contains("train/loss")) loss_steps.insert(e["step"].get<int64_t>());
  EXPECT_EQ(loss_steps.size(), 12u);

  // A record cut by a kill: a length header and half of its data.
  const std::string file = tb_event_files(run_dir("tb_res")).front();
  const std::string torn = tb_frame(tb_event_scalars(1.0, 13, {{"train/loss", 1.0f}}));
  {
    std::ofstream out(file, std::ios::binary | std::ios::app);
    out.write(torn.data(), static_cast<std::streamsize>(torn.size() / 2));
  }
  r = train("tb_res", "--train.max_steps 14 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("dropped an unreadable record"), std::string::npos) << r.output;
  ev = read_events(run_dir("tb_res"));
  expect_events_match_log(ev, metrics("tb_res"));
}

TEST_F(TensorBoardTest, OffWritesNoEventFile) {
  ASSERT_EQ(train("tb_off", "--train.max_steps 2 --train.tensorboard false").exit_code, 0);
  EXPECT_TRUE(tb_event_files(run_dir("tb_off")).empty());
  EXPECT_TRUE(fs::exists(run_dir("tb_off") + "/metrics.jsonl"));
}

// The framing by hand: length, masked CRC-32C of the length, data, masked CRC of the data.
TEST(TensorBoardFormat, FrameLayoutAndMaskedCrc) {
  const std::string f = tb_frame("abc");
  ASSERT_EQ(f.size(), 8u + 4u + 3u + 4u);
  uint64_t len = 0;
  std::memcpy(&len, f.data(), 8);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(f.substr(12, 3), "abc");
  // masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8, mod 2^32: for c = 0x12345678,
  // rotr15 = 0xacf02468, + 0xa282ead8 = 0x4f730f40.
  EXPECT_EQ(tb_masked_crc(0x12345678u), 0x4f730f40u);
}

}  // namespace
}  // namespace ledgerlm
