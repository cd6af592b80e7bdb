// Metrics JSONL writer and number formatting.
#include "train/run/metrics.h"

#include <cmath>
#include <cstdio>

namespace ledgerlm {

void MetricsLog::write(const nlohmann::json& record) {
  file_.append(record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

std::string format_duration(double seconds) {
  char buf[64];
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) {
    std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  } else if (seconds < 3600) {
    std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(seconds) / 60,
                  static_cast<int>(seconds) % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(seconds) / 3600,
                  (static_cast<int>(seconds) % 3600) / 60);
  }
  return buf;
}

std::string format_count(double v) {
  char buf[64];
  if (std::fabs(v) >= 1e9) {
    std::snprintf(buf, sizeof buf, "%.2fG", v / 1e9);
  } else if (std::fabs(v) >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM", v / 1e6);
  } else if (std::fabs(v) >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fk", v / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f", v);
  }
  return buf;
}

}  // namespace ledgerlm
