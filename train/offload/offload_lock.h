// The lock of one rank's offload state files (optim.offload = disk): PREFIX.lock in the offload
// state directory, an flock(2) held for the pager's life. The files PREFIX.*.bin are created
// truncated at start-up and written every step, so two processes on the same PREFIX in one
// directory would silently overwrite each other's optimizer state; with the lock the second is
// refused in one line naming the holder, before it creates or truncates anything. Each rank
// locks its own PREFIX (rank0, rank1, ...), so the ranks of one job share the directory while
// any two jobs that would share it collide on rank 0.
//
// The kernel releases the lock when the process exits, however it exits. The holder removes the
// file when it ends; a process that opened it just before is then holding a lock on a file no
// longer in the directory, so a lock counts only once the path still names the locked file
// (checked after locking; else it is taken again).
#pragma once

#include <string>

namespace ledgerlm {

class OffloadLock {
 public:
  OffloadLock() = default;
  // Locks `path` (creating it and its directory), records this process in it, or throws Error
  // naming the process that holds it.
  explicit OffloadLock(const std::string& path);
  ~OffloadLock();  // removes the file, then releases the lock
  OffloadLock(const OffloadLock&) = delete;
  OffloadLock& operator=(const OffloadLock&) = delete;

  const std::string& path() const { return path_; }
  // Moves the lock file (the lock stays held: it is on the open file); throws Error on failure.
  void rename_to(const std::string& path);

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace ledgerlm
