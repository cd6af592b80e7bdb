// The lock of one rank's offload state files (see offload_lock.h).
#include "train/offload/offload_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

std::string this_process() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '?';
  return error_message("pid ", ::getpid(), " on host ", host);
}

// What the holder recorded ("pid N on host H"), for the refusal.
std::string holder_of(int fd) {
  std::string text(256, '\0');
  const ssize_t n = ::pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? "another process (it has not recorded itself yet)" : text;
}

bool names_file(const std::string& path, int fd) {
  struct stat held {
  }, now{};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
         held.st_dev == now.st_dev;
}

}  // namespace

OffloadLock::OffloadLock(const std::string& path) : path_(path) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  // Retried while the holder that just ended removes the file (or its emptied directory).
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    LLM_REQUIRE(!ec && std::filesystem::is_directory(dir), "optim.offload_dir '", dir.string(),
                "': cannot create the directory (", ec.message(), ")");
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 && errno == ENOENT) continue;
    LLM_REQUIRE(fd >= 0, "optim.offload = disk: cannot open the lock '", path, "': ", errno_text());
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = err == EWOULDBLOCK ? holder_of(fd) : errno_text();
      ::close(fd);
      LLM_REQUIRE(err != EWOULDBLOCK, "optim.offload = disk: the state directory '", dir.string(),
                  "' is in use by ", holder,
                  " (two jobs there would overwrite each other's optimizer state: one job per "
                  "run; a run's state directory is named after its run directory)");
      fail(error_message("optim.offload = disk: cannot lock '", path, "': ", holder));
    }
    if (!names_file(path, fd)) {  // removed by its last holder between open and flock
      ::close(fd);
      continue;
    }
    const std::string me = this_process() + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
      const std::string why = errno_text();
      ::unlink(path.c_str());
      ::close(fd);
      fail(error_message("optim.offload = disk: cannot write the lock '", path, "': ", why));
    }
    fd_ = fd;
    return;
  }
  fail(error_message("optim.offload = disk: cannot lock '", path,
                     "': it keeps being removed by other processes"));
}

OffloadLock::~OffloadLock() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: whoever locks the path next gets a new file
  ::close(fd_);
}

void OffloadLock::rename_to(const std::string& path) {
  LLM_REQUIRE(::rename(path_.c_str(), path.c_str()) == 0, "optim.offload = disk: cannot move '",
              path_, "' to '", path, "': ", errno_text());
  path_ = path;
}

}  // namespace ledgerlm
