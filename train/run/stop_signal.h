// Clean stopping of a training run: SIGINT/SIGTERM (single process), SIGUSR1 (what mpirun
// forwards to every rank; on Ctrl-C OpenMPI's mpirun sends SIGTERM and kills the ranks about
// a second later, so a rank must not start a save it cannot finish) or a file runs/NAME/STOP.
// The handlers only set a flag; the trainer checks it once per step, finishes the step, saves
// a checkpoint and exits kExitStopped. A second SIGINT aborts at once (the default action).
// Several ranks agree before stopping (the training loop all-reduces the flag).
#pragma once

#include <string>

namespace ledgerlm {

// The exit status of a run that stopped at a checkpoint and can resume (`--resume auto`): 75,
// EX_TEMPFAIL of sysexits.h ("try again later"), which requeue wrappers and job arrays already
// read as "not done, run me again". 0 means finished (its budget spent); other non-zero codes
// mean failed. Every rank of a multi-rank run exits with it, so mpirun and srun pass it on.
inline constexpr int kExitStopped = 75;

// Installs the handlers (idempotent). Call stop_signal_restore() to put the old ones back.
// `resume_hint` (may be empty) is printed by the handler with its notice: under mpirun a
// Ctrl-C kills the ranks about a second after SIGTERM, possibly before the save finishes, so
// the notice itself says how to resume from the last complete checkpoint. Without `announce`
// (ranks other than 0) the handler prints nothing: mpirun's SIGTERM to a rank it is ending
// after another rank failed would otherwise announce a stop that will not happen.
void stop_signal_install(const std::string& resume_hint = "", bool announce = true);
void stop_signal_restore();
// The signal that asked for a stop (0 if none).
int stop_signal_pending();
// Why to stop now ("signal SIGTERM", "STOP file runs/NAME/STOP"), or "" to carry on.
std::string stop_check(const std::string& run_dir);
// Removes runs/NAME/STOP after it was honoured (so a resumed run does not stop at once).
void stop_file_clear(const std::string& run_dir);

}  // namespace ledgerlm
