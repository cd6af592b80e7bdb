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

}  // namespace

TrainRun run_setup(TrainCommand& cmd) {
  TrainRun run;
  run.cfg = cmd.run;
  RunConfig& cfg = run.cfg;
  run.meta = run_resolve_data(&cfg);
  cfg.validate();
  check_command(cmd, cfg);
  const std::string run_path = (fs::path(cfg.train.out_dir) / cfg.train.name).string();
  std::string ckpt_path;
  if (!cmd.resume.empty()) {
    ckpt_path = resume_source(cmd.resume, run_path);
    if (ckpt_path.empty())
      std::printf("--resume auto: run %s has no checkpoint yet, starting it\n", run_path.c_str());
  }
  // Opening checks the format, sizes and config before anything in the run directory changes.
  std::optional<CheckpointReader> ckpt;
  if (!ckpt_path.empty()) {
    ckpt.emplace(CheckpointReader::open(ckpt_path));
    run.changed = resume_check_config(*ckpt, cfg);
  }
  run.run_dir = run_dir_prepare(cfg, cfg.train.overwrite || !cmd.resume.empty());

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
  run.state = std::make_unique<ModelState>(cfg, *run.backend);
  load_start(run, cmd, ckpt ? &*ckpt : nullptr);

  // The run directory changes only now that the checkpoint has loaded.
  if (run.resuming()) {
    run_metrics_truncate(run.run_dir, run.loop.step);
  } else {
    fs::remove(run.run_dir + "/metrics.jsonl");
    if (cfg.train.overwrite) fs::remove_all(run.run_dir + "/ckpt");
  }
  run_write_config(run.run_dir, cfg);
  run.state->model().plan(cfg.train.micro_batch, cfg.train.seq_len);
  return run;
}

}  // namespace ledgerlm
