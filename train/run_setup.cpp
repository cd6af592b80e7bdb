// Run setup of `ledgerlm train` (see run_setup.h).
#include "train/run_setup.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "model/base/check.h"
#include "train/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

void check_command(const TrainCommand& cmd, const RunConfig& cfg) {
  LLM_REQUIRE(cfg.train.device == "cpu", "train.device = ", cfg.train.device,
              ": this build trains on the cpu only");
  LLM_REQUIRE(cfg.dist.zero == 0, "dist.zero = ", cfg.dist.zero,
              ": sharding needs several ranks (mpirun); a single process uses dist.zero = 0");
  LLM_REQUIRE(cmd.resume.empty() || cmd.init_from.empty(),
              "--resume continues a run and --init-from starts a new one: pass only one");
}

// Takes the run's lock for the job's life (rank 0 once there are ranks), then removes what jobs
// that were killed left behind: with the lock held, no one else is writing there.
void lock_run(TrainRun& run, const TrainCommand& cmd) {
  if (run.rank != 0) return;
  run.lock = RunLock::acquire(run.run_dir, cmd.command_line);
  const int stale = run_dir_remove_stale(run.run_dir);
  if (stale > 0)
    std::printf("run %s: removed %d leftover(s) of an interrupted job\n", run.run_dir.c_str(),
                stale);
}

// The checkpoint --resume names, opened (format, sizes, config compatibility checked) under the
// lock and before anything in the run directory changes.
std::optional<CheckpointReader> open_resume(TrainRun& run, const TrainCommand& cmd) {
  std::optional<CheckpointReader> ckpt;
  if (cmd.resume.empty()) return ckpt;
  const std::string path = resume_source(cmd.resume, run.run_dir);
  if (path.empty()) {
    std::printf("--resume auto: run %s has no checkpoint yet, starting it\n", run.run_dir.c_str());
    return ckpt;
  }
  ckpt.emplace(CheckpointReader::open(path));
  run.changed = resume_check_config(*ckpt, run.cfg);
  return ckpt;
}

// Backend, data loader (it reads both shards and checks every token) and model state: memory
// only, nothing on disk changes.
void build_state(TrainRun& run) {
  const RunConfig& cfg = run.cfg;
  BackendOptions bo;
  bo.threads = static_cast<int>(cfg.train.threads);
  run.backend = backend_create(cfg.train.device, bo);
  LoaderConfig lc;
  lc.seq = cfg.train.seq_len;
  lc.micro_batch = cfg.train.micro_batch;
  lc.accum = cfg.train.accum;
  lc.world = run.world;
  lc.rank = run.rank;
  lc.seed = static_cast<uint64_t>(cfg.train.seed);
  run.loader = std::make_unique<DataLoader>(cfg.data.dir, lc, &run.backend->tracker());
  // An empty val split (prepare --val-fraction 0) trains without evaluation; a val split too
  // short for one window is an error now rather than at the first evaluation.
  if (run.meta.val.tokens > 0) run.loader->val_windows(cfg.train.seq_len, cfg.train.eval_windows);
  run.state = std::make_unique<ModelState>(cfg, *run.backend);
}

// Weights and counters: from the checkpoint, from --init-from, or a fresh init.
void load_start(TrainRun& run, const TrainCommand& cmd, const CheckpointReader* ckpt) {
  ModelState& state = *run.state;
  if (ckpt != nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    state.checkpoint_load(*ckpt);
    restore_scaler(*ckpt, state);
    restore_loop_state(*ckpt, &run.loop);
    run.loader->set_position(LoaderPosition{run.loop.step, 0});
    run.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.resumed_from = ckpt->dir();
    run.resumed_bytes = ckpt->bytes();
  } else if (!cmd.init_from.empty()) {
    init_from(state, cmd.init_from);
  } else {
    state.init_weights(static_cast<uint64_t>(run.cfg.train.seed));
  }
}

// Removes the run directory again if this start created it and then failed: a failed start
// leaves nothing that would refuse the next one.
class CreatedRunDir {
 public:
  explicit CreatedRunDir(std::string dir) : dir_(std::move(dir)) {}
  ~CreatedRunDir() {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }
  CreatedRunDir(const CreatedRunDir&) = delete;
  CreatedRunDir& operator=(const CreatedRunDir&) = delete;
  void keep() { dir_.clear(); }

 private:
  std::string dir_;
};

// The run directory as the loop expects it: a resumed run's metrics cut back to the
// checkpoint, a new run's (or an overwritten one's) outputs cleared.
void reset_run_dir(const TrainRun& run) {
  if (run.rank != 0) return;
  if (run.resuming()) {
    const int64_t broken = run_metrics_truncate(run.run_dir, run.loop.step);
    if (broken > 0)
      std::printf("resume: dropped %lld unreadable line(s) from %s/metrics.jsonl\n",
                  static_cast<long long>(broken), run.run_dir.c_str());
  } else {
    fs::remove(run.run_dir + "/metrics.jsonl");
    if (run.cfg.train.overwrite) fs::remove_all(run.run_dir + "/ckpt");
  }
}

}  // namespace

TrainRun run_setup(TrainCommand& cmd) {
  TrainRun run;
  run.cfg = cmd.run;
  RunConfig& cfg = run.cfg;
  // Everything that reads input comes first: config, data (meta.json, tokenizer, shards).
  run.meta = run_resolve_data(&cfg);
  cfg.validate();
  check_command(cmd, cfg);
  run.run_dir = run_dir_path(cfg);
  const bool existed = run_dir_check_reuse(cfg, cfg.train.overwrite || !cmd.resume.empty());
  if (existed) lock_run(run, cmd);  // before its checkpoints are read
  std::optional<CheckpointReader> ckpt = open_resume(run, cmd);
  build_state(run);
  load_start(run, cmd, ckpt ? &*ckpt : nullptr);
  run.state->model().plan(cfg.train.micro_batch, cfg.train.seq_len);

  // Only now does the run directory change. A directory this start made is removed again if the
  // start fails, but only once its lock is ours (another job may have taken it in between).
  std::optional<CreatedRunDir> created;
  if (!existed) {
    run_dir_create(run.run_dir);
    lock_run(run, cmd);
    created.emplace(run.run_dir);
  }
  reset_run_dir(run);
  run_write_config(run.run_dir, cfg);
  if (created) created->keep();
  return run;
}

}  // namespace ledgerlm
