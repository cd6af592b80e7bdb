// Opening user-named files for reading (see input_file.h).
#include "model/base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/base/check.h"

namespace ledgerlm {

std::string input_file_kind(unsigned mode) {
  switch (mode & S_IFMT) {
    case S_IFREG:
      return "a regular file";
    case S_IFDIR:
      return "a directory";
    case S_IFIFO:
      return "a FIFO";
    case S_IFCHR:
      return "a character device";
    case S_IFBLK:
      return "a block device";
    case S_IFSOCK:
      return "a socket";
    default:
      return "not a regular file";
  }
}

int input_file_open(const std::string& path, const std::string& what) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(error_message("cannot stat ", what, " '", path, "': ", std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(error_message(what, " '", path, "' is ", input_file_kind(st.st_mode),
                       ", expected a regular file"));
  }
  // Reads of a regular file never block anyway; clear the flag so the descriptor behaves as a
  // plain open's would.
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int err = errno;
    ::close(fd);
    fail(error_message("cannot open ", what, " '", path, "': ", std::strerror(err)));
  }
  return fd;
}

std::string input_file_read(const std::string& path, const std::string& what) {
  const int fd = input_file_open(path, what);
  LLM_REQUIRE(fd >= 0, "cannot open ", what, " '", path, "': ", errno_text());
  return input_file_read_fd(fd, path, what);
}

std::string input_file_read_fd(int fd, const std::string& path, const std::string& what) {
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      fail(error_message("cannot read ", what, " '", path, "': ", std::strerror(err)));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

void input_file_require_regular(const std::string& path, const std::string& what) {
  const int fd = input_file_open(path, what);
  if (fd >= 0) ::close(fd);
}

}  // namespace ledgerlm
