// TensorBoard scalars of a run: runs/NAME/events.out.tfevents.TIME.HOST, written by rank 0 from
// the same records as metrics.jsonl, so `tensorboard --logdir runs` shows every run and the
// trainer needs neither Python nor a protobuf library. The format (TensorFlow's event file) is
// small enough to write by hand:
//   - every record is TFRecord-framed: its length as uint64 little-endian, the masked CRC-32C of
//     those 8 bytes, the data, the masked CRC-32C of the data, where
//     masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8;
//   - every record's data is an `Event` protobuf: wall_time (double, field 1), step (int64,
//     field 2), and either file_version (string, field 3; "brain.Event:2" in the first record)
//     or summary (field 5): Summary { repeated Value value = 1 },
//     Value { string tag = 1; float simple_value = 2 }.
// One file per run: a resumed run drops the events after its checkpoint (tb_truncate) and
// appends to the same file, as metrics.jsonl does.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/run/append_file.h"

namespace ledgerlm {

struct TbScalar {
  std::string tag;
  float value = 0.0f;
};

// The scalars of one metrics.jsonl record, in a fixed order (none for records without figures
// to plot, e.g. the summary): a step record's loss, lr, grad_norm, ... as "train/...", an
// evaluation's as "val/...", a checkpoint save's as "ckpt/...", the ledger's totals as "mem/...".
std::vector<TbScalar> tb_scalars(const nlohmann::json& record);

// Encoding (exposed for the tests).
uint32_t tb_masked_crc(uint32_t crc);
std::string tb_frame(std::string_view data);
std::string tb_event_scalars(double wall_time, int64_t step, const std::vector<TbScalar>& scalars);
std::string tb_event_file_version(double wall_time);

// The run's event files (names beginning "events.out.tfevents."), sorted.
std::vector<std::string> tb_event_files(const std::string& run_dir);

class TensorBoardLog {
 public:
  // Appends to the run's event file, or creates events.out.tfevents.TIME.HOST with its
  // file_version record. Writes are checked like the metrics log's (append_file.h).
  explicit TensorBoardLog(const std::string& run_dir);
  void write(const nlohmann::json& record);  // the record's scalars: one event at its step
  void sync() { file_.sync(); }

 private:
  AppendFile file_;
};

// On resume: keeps, in every event file of the run, the records of steps up to `step` and
// drops the rest and everything from the first record that does not read back (its length or
// data CRC wrong, cut by a kill or a full disk), atomically. Returns the records dropped as
// unreadable.
int64_t tb_truncate(const std::string& run_dir, int64_t step);

}  // namespace ledgerlm
