// A real small filesystem that can be filled, for the disk-full tests: a tmpfs mounted on a temp
// directory (needs root, or CAP_SYS_ADMIN, and a kernel that allows the mount here). Where the
// mount is not permitted, `ok()` is false and `why()` says why, so a test skips with that message
// instead of passing without having run.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

class Tmpfs {
 public:
  explicit Tmpfs(int64_t bytes) {
    path_ = make_temp_dir("tmpfs_");
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, opts.c_str()) == 0) {
      mounted_ = true;
    } else {
      why_ = std::string("cannot mount a tmpfs on ") + path_ + ": " + std::strerror(errno) +
             " (needs root or CAP_SYS_ADMIN)";
    }
  }
  ~Tmpfs() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  Tmpfs(const Tmpfs&) = delete;
  Tmpfs& operator=(const Tmpfs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& why() const { return why_; }
  const std::string& path() const { return path_; }

  int64_t free_bytes() const {
    struct statvfs st;
    if (::statvfs(path_.c_str(), &st) != 0) return -1;
    return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
  }

  // Fills the filesystem with FILLER (page by page until ENOSPC), then gives back `leave_pages`
  // pages, so exactly that much room is left.
  void fill(int64_t leave_pages) {
    const std::string filler = path_ + "/filler";
    const int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    const std::vector<char> page(4096, 'f');
    int64_t written = 0;
    while (::write(fd, page.data(), page.size()) == static_cast<ssize_t>(page.size()))
      written += 4096;
    const int truncated = ::ftruncate(fd, std::max<int64_t>(0, written - leave_pages * 4096));
    (void)truncated;
    ::close(fd);
  }
  void unfill() { std::filesystem::remove(path_ + "/filler"); }

 private:
  std::string path_, why_;
  bool mounted_ = false;
};

}  // namespace ledgerlm::testing
