// The subcommands' implementations; each returns the process exit code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/cli/config_flags.h"
#include "train/run/train_request.h"

namespace ledgerlm {

class Comm;

struct TrainCommand {
  ConfigBinding config;  // binds the config keys' flags to request.run
  TrainRequest request;
};
// `comm` connects the ranks of an mpirun job (the single-rank Comm otherwise).
int command_train(TrainCommand& cmd, Comm& comm);

struct EvalCommand {
  std::string run_dir;
  std::string split = "val";  // val | train | test
  std::string text_file;      // evaluate on this text instead of a split
  int64_t max_windows = 0;    // 0: the whole split
  int64_t batch = 8;
  int64_t threads = 0;
  std::string device = "auto";  // cpu | cuda | auto (backend_resolve)
};
int command_eval(const EvalCommand& cmd);

struct SampleCommand {
  std::string run_dir;
  std::string prompt;
  int64_t tokens = 200;
  double temperature = 1.0;
  int64_t top_k = 0;   // 0: off
  double top_p = 1.0;  // 1: off
  int64_t seed = 0;
  bool no_cache = false;  // decode by recomputing the whole prefix each token
  int64_t threads = 0;
  std::string device = "auto";  // cpu | cuda | auto (backend_resolve)
};
int command_sample(const SampleCommand& cmd);

struct BenchCommand {
  ConfigBinding config;
  RunConfig run;
  int64_t steps = 10;
  int64_t warmup = 2;
};
int command_bench(BenchCommand& cmd);

struct ExportCommand {
  std::string run_dir;
  std::string format = "hf";  // hf: Hugging Face GPT2LMHeadModel safetensors + config.json
  std::string out_dir;
  // A LoRA run's adapters alone, in PEFT's layout (ckpt/peft_export.h), instead of merged weights.
  bool lora_only = false;
};
int command_export(const ExportCommand& cmd);

struct ImportCommand {
  std::string format = "hf";  // hf: a Hugging Face GPT2LMHeadModel directory
  std::string from;           // the model directory (config.json, model.safetensors)
  std::string out_dir;        // the run directory to create (runs/NAME)
  std::string data_dir;       // prepared data to attach ("" : none)
};
int command_import(const ImportCommand& cmd);

struct CompareCommand {
  std::vector<std::string> run_dirs;
  bool json = false;  // one JSON object instead of the tables
  bool tsv = false;   // one row per run: the keys that differ, then the summary's figures
};
int command_compare(const CompareCommand& cmd);

// `study plan | run | report` (study_command.cpp, study_plan.h).
struct StudyPlanCommand {
  std::string study_file;
  std::string out_dir;
};
int command_study_plan(const StudyPlanCommand& cmd);

struct StudyRunCommand {
  std::string dir;
  int64_t jobs = 1;             // runs at a time; each gets cores / jobs threads
  bool print_commands = false;  // print the unfinished runs' `ledgerlm train` lines, run nothing
  // Every run on this many ranks at its global batch (study_spread_ranks; 0: as planned).
  int64_t ranks_per_run = 0;
  // --slurm (study_slurm.h): submit the runs as an sbatch job array instead of running them.
  bool slurm = false;
  std::string partition;                 // sbatch --partition ("": the cluster's default)
  std::string time;                      // sbatch --time per array task ("": the default)
  int64_t cpus_per_run = 1;              // CPUs (and train.threads) per rank of a run
  int64_t max_parallel = 0;              // the array's %K throttle (0: none)
  int64_t stop_ahead = 300;              // --signal=B:USR1@N: seconds before the time limit
  std::vector<std::string> sbatch_args;  // passed to sbatch as they are
  bool dry_run = false;                  // print the script and the sbatch line; submit nothing
  // The job after a study's arrays: evaluations, sweep widening, finals, the next submission.
  bool slurm_next = false;
};
int command_study_run(const StudyRunCommand& cmd);

// `study status DIR` (study_status.cpp): each run finished / running / queued / stopped /
// failed / not started, and a one-line total.
struct StudyStatusCommand {
  std::string dir;
};
int command_study_status(const StudyStatusCommand& cmd);

struct StudyReportCommand {
  std::string dir;
  std::string python;   // "": $LEDGERLM_PYTHON, else /usr/bin/python3 (Debian's, with scipy)
  std::string script;   // "": scripts/study_report.py found beside the binary
  std::string publish;  // "": none; else the directory the report and the runs' small files go to
  bool allow_dirty = false;  // report runs trained by a build with uncommitted changes
  bool allow_mixed = false;  // report runs trained by different builds
};
int command_study_report(const StudyReportCommand& cmd);

}  // namespace ledgerlm
