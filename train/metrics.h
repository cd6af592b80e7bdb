// Metrics: one JSON object per line in runs/NAME/metrics.jsonl (for scripts) and a live progress
// line on stdout (for people).
#pragma once

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace ledgerlm {

class MetricsLog {
 public:
  MetricsLog() = default;
  // Appends to `path` (a resumed run continues its log).
  explicit MetricsLog(const std::string& path);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  void write(const nlohmann::json& record);  // one line, flushed

 private:
  std::FILE* file_ = nullptr;
};

// "1m23s", "4.2s" for ETAs and summaries.
std::string format_duration(double seconds);
// "12.3k", "4.56M"
std::string format_count(double value);

}  // namespace ledgerlm
