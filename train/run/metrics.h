// Metrics: one JSON object per line in runs/NAME/metrics.jsonl (for scripts) and a live progress
// line on stdout (for people).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "train/run/append_file.h"

namespace ledgerlm {

// Every write is checked (append_file.h): a failed or short write (a full disk) truncates the file
// back to its last complete record and throws one Error naming the file, so the run stops instead
// of training on without its log. sync() makes the records durable (before each checkpoint).
// Several ranks: rank 0 writes the log.
class MetricsLog {
 public:
  // Appends to `path` (a resumed run continues its log).
  explicit MetricsLog(const std::string& path) : file_(path, "metrics log") {}
  void write(const nlohmann::json& record);  // one line
  void sync() { file_.sync(); }              // fdatasync

 private:
  AppendFile file_;
};

// "1m23s", "4.2s" for ETAs and summaries.
std::string format_duration(double seconds);
// "12.3k", "4.56M"
std::string format_count(double value);

}  // namespace ledgerlm
