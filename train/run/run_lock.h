// The lock of a run directory: one job at a time on runs/NAME.
//
// The lock is an flock(2) on runs/NAME/.lock, taken before the run directory is read for a
// resume or changed in any way, and held until the job ends: the kernel releases it when the
// process exits, however it exits (kill -9 included), so there are no stale locks to clean up.
// The holder writes who it is (pid, host, start time, command) into the file; a second job on
// the same run — `--resume auto`, `--train.overwrite true`, or a plain start — is refused with
// one line naming that holder.
//
// Temporaries (interrupted checkpoint saves, half-written files) are stale exactly when the lock
// can be taken: whoever wrote them has exited. They are removed right after the lock is taken,
// and at no other time, so a running save never loses its files to another process.
//
// Several ranks: rank 0 takes the lock for the whole job (TrainRun owns it for the job's life);
// the other ranks hold nothing. On a shared filesystem (NFS) Linux maps flock to POSIX record
// locks, which the server arbitrates between hosts.
#pragma once

#include <memory>
#include <string>

namespace ledgerlm {

class RunLock {
 public:
  // Locks RUN_DIR/.lock (creating the file; RUN_DIR must exist) and records the holder, or
  // throws Error naming the process that holds it. `command` is the holder's command line.
  static std::unique_ptr<RunLock> acquire(const std::string& run_dir, const std::string& command);
  ~RunLock();  // releases the lock (the file stays: removing it would race with a new holder)
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;

  const std::string& path() const { return path_; }
  // Throws an Error when RUN_DIR/.lock is no longer the file this job locked (removed by hand or
  // by a cleanup script, or replaced): another job may then have taken the run, and this one
  // must stop writing into it. An flock cannot see that by itself (it lives on the descriptor,
  // not the path), so the holder compares its descriptor's inode with the path's: call it before
  // every write into the run (the trainer does at every step's metrics record). Two stat calls.
  void verify() const;

 private:
  RunLock(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// Opens PATH (created when absent), takes an flock(2) on it without waiting and records this
// process in it (pid, host, start time, COMMAND): the descriptor, closing which releases the lock.
// Held by another process: an Error "KIND 'NAME' is in use by <its record> (HINT)". The run lock
// and the study lock (train/cli/study_lock.h) are both this.
int lock_file_take(const std::string& path, const std::string& kind, const std::string& name,
                   const std::string& hint, const std::string& command);

// Removes the leftovers of jobs that ended before finishing a write in RUN_DIR: `*.tmp` files
// and the checkpoint temporaries under RUN_DIR/ckpt (checkpoint_remove_stale). Call only while
// holding the run's lock. Returns the number of entries removed or restored.
int run_dir_remove_stale(const std::string& run_dir);

}  // namespace ledgerlm
