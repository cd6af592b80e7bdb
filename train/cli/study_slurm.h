// Studies on a Slurm cluster: `study run DIR --slurm` writes sbatch job-array scripts under
// DIR/slurm/ (one array task per run that is neither finished nor queued; one array per rank
// count, cut at the cluster's MaxArraySize) and submits them, then a job that waits for them
// (--dependency=afterany) and runs `study run DIR --slurm --next`: the evaluations, sweep widening
// and finals, and the submission of what they add. Every job id and the task -> run mapping are
// recorded in manifest.json ("slurm": {"jobs": [...]}; the next job with "next": true and no
// runs), so a later submission leaves the queued runs alone and `study status` can ask squeue
// about them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/cli/commands.h"

namespace ledgerlm {

// S quoted for a POSIX shell (unchanged when it needs no quotes).
std::string study_shell_quote(const std::string& s);

// The state squeue gives each run of the manifest's recorded Slurm jobs that is still in the
// queue ("PENDING", "RUNNING", "REQUEUED", ...), by run name. Empty when the manifest records no
// job or squeue is not on PATH; `error` (when not null) gets squeue's own message when it ran and
// failed.
std::map<std::string, std::string> study_slurm_queue(const nlohmann::json& manifest,
                                                     std::string* error = nullptr);

// Whether a squeue state means the run will still start or is starting (not running yet).
bool study_slurm_is_queued(const std::string& state);

// What a submission needs from the study runner: a run's `ledgerlm train` argv (with `mpirun
// -np W` in front for W > 1 ranks; without --resume or --train.overwrite, which the array task
// decides when it starts) for THREADS threads in all, and a run's state (finished | failed |
// pending).
struct StudySlurmRunner {
  std::function<std::vector<std::string>(const nlohmann::json& run, int64_t threads)> train_argv;
  std::function<std::string(const std::string& name)> state;
};

// `study run DIR --slurm`: submits every run of MANIFEST that is neither finished, failed nor in
// the queue (its recorded jobs' array tasks, from squeue), one job array per rank count, and
// records each job in MANIFEST (written to DIR), then the next job after them. Runs go on
// cmd.ranks_per_run ranks when > 0 (study_spread_ranks). With cmd.dry_run, prints the scripts and
// the sbatch lines and changes nothing. Returns the exit code.
int study_slurm_submit(const StudyRunCommand& cmd, nlohmann::json* manifest,
                       const StudySlurmRunner& runner);

}  // namespace ledgerlm
