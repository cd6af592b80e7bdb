// Checked record appends (see append_file.h).
#include "train/run/append_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "model/base/check.h"

namespace ledgerlm {

AppendFile::AppendFile(const std::string& path, const std::string& what)
    : path_(path), what_(what) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd_ >= 0, "cannot open ", what, " '", path, "' for writing: ", std::strerror(errno));
  struct stat st;
  LLM_REQUIRE(::fstat(fd_, &st) == 0, "cannot stat ", what, " '", path,
              "': ", std::strerror(errno));
  size_ = st.st_size;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

void AppendFile::fail_write(const std::string& why) const {
  fail(error_message("cannot write ", what_, " '", path_, "': ", why,
                     " (the run stops here; its last checkpoint resumes it)"));
}

void AppendFile::append(std::string_view record) {
  if (fd_ < 0) return;
  size_t done = 0;
  while (done < record.size()) {
    const ssize_t n = ::write(fd_, record.data() + done, record.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "short write";
      // Cut the partial record so the file ends on a complete one (freeing, not using, space).
      if (done > 0) {
        const bool cut = ::ftruncate(fd_, size_) == 0;
        (void)cut;  // if not, a resume drops the partial record (it cannot be parsed)
      }
      fail_write(why);
    }
    done += static_cast<size_t>(n);
  }
  size_ += static_cast<int64_t>(record.size());
}

void AppendFile::sync() {
  if (fd_ >= 0 && ::fdatasync(fd_) != 0) fail_write(std::strerror(errno));
}

}  // namespace ledgerlm
