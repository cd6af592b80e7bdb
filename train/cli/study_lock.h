// The lock of a study directory: one `study run` at a time on DIR.
//
// Two `study run`s on one directory would train the same runs twice (the second is refused by
// each run's own lock, runs/NAME/.lock, and counts that as a failure), widen the same sweep twice
// and race on manifest.json. The lock is an flock(2) on DIR/.study.lock, like the run lock
// (train/run/run_lock.h): taken before the manifest is read, held until the command ends, released
// by the kernel however the process ends, so no stale lock is left behind. A second `study run`
// (or `--slurm` submission) is refused at once, in one line naming the holder (pid, host, start,
// command); it does not wait, so that a script learns at once that another one is at work.
// Across hosts sharing the study directory (NFS), Linux maps flock to POSIX record locks that
// the server arbitrates, so the lock holds between a login node and compute nodes too.
#pragma once

#include <memory>
#include <string>

namespace ledgerlm {

class StudyLock {
 public:
  // Locks DIR/.study.lock (DIR must exist) and records the holder, or throws Error naming it.
  static std::unique_ptr<StudyLock> acquire(const std::string& dir, const std::string& command);
  ~StudyLock();
  StudyLock(const StudyLock&) = delete;
  StudyLock& operator=(const StudyLock&) = delete;

 private:
  explicit StudyLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace ledgerlm
