// Atomic, checked small-file writes (see atomic_file.h).
#include "model/base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

void write_all_or_remove(int fd, const std::string& tmp, const std::string& path,
                         const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? errno_text() : "short write";
      ::close(fd);
      ::unlink(tmp.c_str());
      fail(error_message("cannot write '", path, "': ", why));
    }
    done += static_cast<size_t>(n);
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot write '", path, "': cannot create '", tmp, "': ", errno_text());
  write_all_or_remove(fd, tmp, path, text);
  std::string why;
  if (::fsync(fd) != 0) why = errno_text();
  if (::close(fd) != 0 && why.empty()) why = errno_text();
  if (why.empty() && std::rename(tmp.c_str(), path.c_str()) != 0) why = errno_text();
  if (!why.empty()) {
    ::unlink(tmp.c_str());
    fail(error_message("cannot write '", path, "': ", why));
  }
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(".") : parent.string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  const bool dir_synced = dfd >= 0 && ::fsync(dfd) == 0;
  why = errno_text();
  if (dfd >= 0) ::close(dfd);
  LLM_REQUIRE(dir_synced, "cannot write '", path, "': fsync of '", dir, "': ", why);
}

}  // namespace ledgerlm
