// Run directory lock and stale temporaries (see run_lock.h).
#include "train/run/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// What the holder wrote into the lock file, as one phrase for the refusal message.
std::string holder_text(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const nlohmann::json h = nlohmann::json::parse(text, nullptr, false);
  if (!h.is_object()) return "another ledgerlm process (it has not recorded itself yet)";
  return error_message("pid ", h.value("pid", 0), " on host ", h.value("host", "?"), ", since ",
                       h.value("started", "?"), ": ", h.value("command", "?"));
}

void record_holder(int fd, const std::string& path, const std::string& kind,
                   const std::string& command) {
  const std::string text = nlohmann::json{{"pid", static_cast<int64_t>(::getpid())},
                                          {"host", host_name()},
                                          {"started", utc_now()},
                                          {"command", command}}
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n";
  LLM_REQUIRE(::ftruncate(fd, 0) == 0 &&
                  ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size()),
              "cannot write the ", kind, " lock '", path, "': ", std::strerror(errno));
}

}  // namespace

int lock_file_take(const std::string& path, const std::string& kind, const std::string& name,
                   const std::string& hint, const std::string& command) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot open the ", kind, " lock '", path, "': ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? holder_text(fd) : std::strerror(err);
    ::close(fd);
    LLM_REQUIRE(err != EWOULDBLOCK, kind, " '", name, "' is in use by ", holder, " (", hint, ")");
    fail(error_message("cannot lock the ", kind, " '", path, "': ", holder));
  }
  try {
    record_holder(fd, path, kind, command);
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

std::unique_ptr<RunLock> RunLock::acquire(const std::string& run_dir, const std::string& command) {
  const std::string path = (fs::path(run_dir) / ".lock").string();
  const int fd = lock_file_take(
      path, "run", run_dir,
      "one job per run: wait for it to finish, or stop it with a file " + run_dir + "/STOP",
      command);
  return std::unique_ptr<RunLock>(new RunLock(path, fd));
}

void RunLock::verify() const {
  struct stat held {
  }, now{};
  const bool same = ::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &now) == 0 &&
                    held.st_ino == now.st_ino && held.st_dev == now.st_dev;
  LLM_REQUIRE(same, "run lock '", path_,
              "' was removed or replaced while this job held it (another job may now be "
              "training this run): stopping without writing more; once one job runs, continue "
              "with --resume auto");
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

int run_dir_remove_stale(const std::string& run_dir) {
  int removed = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0 && e.is_regular_file(ec)) {
      removed += fs::remove(e.path(), ec) ? 1 : 0;
    }
  }
  const fs::path ckpt = fs::path(run_dir) / "ckpt";
  if (fs::is_directory(ckpt, ec)) removed += checkpoint_remove_stale(ckpt.string());
  return removed;
}

}  // namespace ledgerlm
