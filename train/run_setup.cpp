// Run setup of `ledgerlm train` (see run_setup.h).
#include "train/run_setup.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "model/base/check.h"
#include "train/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

void check_command(const TrainCommand& cmd, const RunConfig& cfg) {
  LLM_REQUIRE(cfg.train.device == "cpu", "train.device = ", cfg.train.device,
              ": this build trains on the cpu only");
  LLM_REQUIRE(cmd.resume.empty() || cmd.init_from.empty(),
              "--resume continues a run and --init-from starts a new one: pass only one");
}

// Rank 0's value of `mine` unless every rank agrees: then "", else the first disagreement.
std::string disagreement(Comm& comm, const std::string& what, const std::string& mine) {
  const std::vector<std::string> all = comm.all_gather_text(mine);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) return error_message("rank ", r, "'s ", what, " differs from rank 0's");
  return "";
}

// The resolved config of every rank must be rank 0's: names the first key that differs.
void check_same_config(Comm& comm, const RunConfig& cfg) {
  if (comm.world() == 1) return;
  std::string mine;
  for (const auto& [key, value] : run_config_flat(cfg)) mine += key + " = " + value + "\n";
  const std::vector<std::string> all = comm.all_gather_text(mine);
  for (size_t r = 1; r < all.size(); ++r) {
    if (all[r] == all[0]) continue;
    std::istringstream a(all[0]), b(all[r]);
    std::string la, lb;
    while (std::getline(a, la) && std::getline(b, lb) && la == lb) {
    }
    throw AgreedError(error_message("rank ", r, "'s resolved config differs from rank 0's: '", lb,
                                    "' there, '", la,
                                    "' on rank 0 (every rank must get the same config file and "
                                    "flags)"));
  }
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

int threads_per_rank(int64_t configured, int local_ranks) {
  if (configured > 0) return static_cast<int>(configured);
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  const int host_cores = online > 0 ? static_cast<int>(online) : omp_get_num_procs();
  // Also never more than this process may run on (mpirun binds ranks to cores).
  return std::max(1, std::min(omp_get_num_procs(), host_cores / std::max(local_ranks, 1)));
}

TrainRun run_setup(TrainCommand& cmd, Comm& comm) {
  TrainRun run;
  run.comm = &comm;
  run.world = comm.world();
  run.rank = comm.rank();
  run.cfg = cmd.run;
  RunConfig& cfg = run.cfg;
  comm_agree(comm, [&] {
    run.meta = run_resolve_data(&cfg);
    cfg.validate();
    check_command(cmd, cfg);
  });
  check_same_config(comm, cfg);
  // The same path may hold different data on different hosts: the data must agree too.
  const DataMeta& m = run.meta;
  const std::string data_differs =
      disagreement(comm, "data (meta.json)",
                   error_message(m.tokenizer, " vocab ", m.vocab_size, " train ", m.train.tokens,
                                 " tokens ", m.train.bytes, " bytes, val ", m.val.tokens,
                                 " tokens ", m.val.bytes, " bytes"));
  if (!data_differs.empty())
    throw AgreedError(data_differs + " in '" + cfg.data.dir +
                      "' (every host must see the same prepared data)");
  run.stage = zero_stage_effective(cfg, run.world);
  const std::string run_path = (fs::path(cfg.train.out_dir) / cfg.train.name).string();
  std::string ckpt_path;
  std::optional<CheckpointReader> ckpt;
  // Opening checks the format, sizes and config before anything in the run directory changes.
  comm_agree(comm, [&] {
    if (!cmd.resume.empty()) ckpt_path = resume_source(cmd.resume, run_path);
    if (!ckpt_path.empty()) {
      ckpt.emplace(CheckpointReader::open(ckpt_path));
      run.changed = resume_check_config(*ckpt, cfg);
    }
  });
  const std::string differs = disagreement(comm, "checkpoint to resume", ckpt_path);
  if (!differs.empty())
    throw AgreedError(differs + " (several hosts need train.out_dir on a shared filesystem)");
  if (run.lead() && !cmd.resume.empty() && ckpt_path.empty())
    std::printf("--resume auto: run %s has no checkpoint yet, starting it\n", run_path.c_str());
  comm_agree(comm, [&] {
    if (run.lead()) run.run_dir = run_dir_prepare(cfg, cfg.train.overwrite || !cmd.resume.empty());
  });
  run.run_dir = comm.all_gather_text(run.run_dir).front();
  comm_agree(comm, [&] {
    LLM_REQUIRE(fs::is_directory(run.run_dir), "run directory '", run.run_dir,
                "' is not visible on this rank (several hosts need train.out_dir on a shared "
                "filesystem)");
  });

  BackendOptions bo;
  bo.threads = threads_per_rank(cfg.train.threads, comm.local_world());
  run.backend = backend_create(cfg.train.device, bo);
  LoaderConfig lc;
  lc.seq = cfg.train.seq_len;
  lc.micro_batch = cfg.train.micro_batch;
  lc.accum = cfg.train.accum;
  lc.world = run.world;
  lc.rank = run.rank;
  lc.seed = static_cast<uint64_t>(cfg.train.seed);
  comm_agree(comm, [&] {
    run.loader = std::make_unique<DataLoader>(cfg.data.dir, lc, &run.backend->tracker());
  });
  ModelStateOptions so;
  so.comm = &comm;
  run.state = std::make_unique<ModelState>(cfg, *run.backend, so);
  load_start(run, cmd, ckpt ? &*ckpt : nullptr);

  // The run directory changes only now that the checkpoint has loaded.
  if (run.lead()) {
    if (run.resuming()) {
      run_metrics_truncate(run.run_dir, run.loop.step);
    } else {
      fs::remove(run.run_dir + "/metrics.jsonl");
      if (cfg.train.overwrite) fs::remove_all(run.run_dir + "/ckpt");
    }
    run_write_config(run.run_dir, cfg);
  }
  comm.barrier();
  run.state->model().plan(cfg.train.micro_batch, cfg.train.seq_len);
  return run;
}

}  // namespace ledgerlm
