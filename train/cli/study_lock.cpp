// The study directory's lock (see study_lock.h).
#include "train/cli/study_lock.h"

#include <unistd.h>

#include "train/run/run_lock.h"

namespace ledgerlm {

std::unique_ptr<StudyLock> StudyLock::acquire(const std::string& dir, const std::string& command) {
  return std::unique_ptr<StudyLock>(new StudyLock(lock_file_take(
      dir + "/.study.lock", "study", dir,
      "one `study run` per study directory at a time: wait for it to end, or stop it with Ctrl-C",
      command)));
}

StudyLock::~StudyLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace ledgerlm
