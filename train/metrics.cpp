// Metrics JSONL writer and number formatting.
#include "train/metrics.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "model/base/check.h"

namespace ledgerlm {

MetricsLog::MetricsLog(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd_ >= 0, "cannot open metrics log '", path, "' for writing: ", std::strerror(errno));
  struct stat st;
  LLM_REQUIRE(::fstat(fd_, &st) == 0, "cannot stat metrics log '", path,
              "': ", std::strerror(errno));
  size_ = st.st_size;
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (fd_ < 0) return;
  const std::string line =
      record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "short write";
      // Cut the partial record so the file ends on a complete line (freeing, not using, space).
      if (done > 0) {
        const bool cut = ::ftruncate(fd_, size_) == 0;
        (void)cut;  // if not, a resume drops the partial line (run_metrics_truncate)
      }
      fail(error_message("cannot write metrics log '", path_, "': ", why,
                         " (the run stops here; its last checkpoint resumes it)"));
    }
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(line.size());
}

void MetricsLog::sync() {
  if (fd_ < 0) return;
  LLM_REQUIRE(::fdatasync(fd_) == 0, "cannot write metrics log '", path_,
              "': ", std::strerror(errno), " (the run stops here; its last checkpoint resumes it)");
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
