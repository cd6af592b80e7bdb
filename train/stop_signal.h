// Clean stopping of a training run: SIGINT/SIGTERM (single process), SIGUSR1 (what mpirun
// forwards; it kills ranks ~1 s after SIGTERM, see PITFALLS.md) or a file runs/NAME/STOP.
// The handlers only set a flag; the trainer checks it once per step, finishes the step, saves
// a checkpoint and exits 0. A second SIGINT aborts at once (the default action).
// Several ranks must agree before stopping (an all-reduce of the flag): not needed with one.
#pragma once

#include <string>

namespace ledgerlm {

// Installs the handlers (idempotent). Call stop_signal_restore() to put the old ones back.
void stop_signal_install();
void stop_signal_restore();
// The signal that asked for a stop (0 if none).
int stop_signal_pending();
// Why to stop now ("signal SIGTERM", "STOP file runs/NAME/STOP"), or "" to carry on.
std::string stop_check(const std::string& run_dir);
// Removes runs/NAME/STOP after it was honoured (so a resumed run does not stop at once).
void stop_file_clear(const std::string& run_dir);

}  // namespace ledgerlm
