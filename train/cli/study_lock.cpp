// The study directory's lock (see study_lock.h).
#include "train/cli/study_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "model/base/check.h"

namespace ledgerlm {

namespace {

std::string holder_text(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const nlohmann::json h = nlohmann::json::parse(text, nullptr, false);
  if (!h.is_object()) return "another ledgerlm process (it has not recorded itself yet)";
  return error_message("pid ", h.value("pid", 0), " on host ", h.value("host", "?"), ", since ",
                       h.value("started", "?"), ": ", h.value("command", "?"));
}

}  // namespace

std::unique_ptr<StudyLock> StudyLock::acquire(const std::string& dir, const std::string& command) {
  const std::string path = dir + "/.study.lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot open the study lock '", path, "': ", std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? holder_text(fd) : std::strerror(err);
    ::close(fd);
    LLM_REQUIRE(err != EWOULDBLOCK, "study '", dir, "' is in use by ", holder,
                " (one `study run` per study directory at a time: wait for it to end, or stop "
                "it with Ctrl-C)");
    fail(error_message("cannot lock the study '", path, "': ", holder));
  }
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char started[32];
  std::strftime(started, sizeof started, "%Y-%m-%d %H:%M:%S UTC", &tm);
  const std::string text = nlohmann::json{{"pid", static_cast<int64_t>(::getpid())},
                                          {"host", host},
                                          {"started", started},
                                          {"command", command}}
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size())) {
    const int err = errno;
    ::close(fd);
    fail(error_message("cannot write the study lock '", path, "': ", std::strerror(err)));
  }
  return std::unique_ptr<StudyLock>(new StudyLock(fd));
}

StudyLock::~StudyLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ledgerlm
