// Run setup of `ledgerlm train` (see run_setup.h).
#include "train/run/run_setup.h"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include "data/data_check.h"
#include "model/backend/common/cudnn_library.h"
#include "model/backends/backend_factory.h"
#include "model/base/check.h"
#include "model/base/subnormals.h"
#include "optim/optim_traits.h"
#include "train/comm/comm_select.h"
#include "train/config/attention_choice.h"
#include "train/run/memory_admission.h"
#include "train/run/run_dir.h"
#include "train/run/run_summary.h"
#include "train/run/run_tokenizer.h"
#include "train/run/tensorboard.h"
#include "train/run/test_stop_hook.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

void check_command(const TrainRequest& cmd, const RunConfig& cfg) {
  LLM_REQUIRE(cfg.precision.matmul != "tf32" || cfg.train.device == "cuda",
              "precision.matmul = tf32 is a CUDA tensor-core mode: it needs train.device = cuda "
              "(train.device is ",
              cfg.train.device, ")");
  LLM_REQUIRE(cmd.resume.empty() || cmd.init_from.empty(),
              "--resume continues a run and --init-from starts a new one: pass only one");
}

// "" when every rank's `mine` is rank 0's, else which rank differs.
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

// The same path may hold different data on different hosts: the data must agree too.
void check_same_data(Comm& comm, const RunConfig& cfg, const DataMeta& m) {
  if (comm.world() == 1) return;
  const std::string differs =
      disagreement(comm, "data (meta.json)",
                   error_message(m.tokenizer, " vocab ", m.vocab_size, " train ", m.train.tokens,
                                 " tokens ", m.train.bytes, " bytes, val ", m.val.tokens,
                                 " tokens ", m.val.bytes, " bytes"));
  if (!differs.empty())
    throw AgreedError(differs + " in '" + cfg.data.dir +
                      "' (every host must see the same prepared data)");
}

// Takes the run's lock for the job's life (rank 0 once there are ranks), then removes what jobs
// that were killed left behind: with the lock held, no one else is writing there.
void lock_run(TrainRun& run, const TrainRequest& cmd) {
  if (!run.lead()) return;
  run.lock = RunLock::acquire(run.run_dir, cmd.command_line);
  const int stale = run_dir_remove_stale(run.run_dir);
  if (stale > 0)
    std::printf("run %s: removed %d leftover(s) of an interrupted job\n", run.run_dir.c_str(),
                stale);
}

// The checkpoint --resume names, opened (format, sizes, config compatibility checked) under the
// lock and before anything in the run directory changes; every rank opens it.
std::optional<CheckpointReader> open_resume(TrainRun& run, const TrainRequest& cmd) {
  std::optional<CheckpointReader> ckpt;
  if (cmd.resume.empty()) return ckpt;
  const std::string path = resume_source(cmd.resume, run.run_dir);
  if (path.empty()) {
    if (run.lead())
      std::printf("--resume auto: run %s has no checkpoint yet, starting it\n",
                  run.run_dir.c_str());
    return ckpt;
  }
  ckpt.emplace(CheckpointReader::open(path));
  run.changed = resume_check_config(*ckpt, run.cfg);
  run.batch_changed = resume_global_batch_change(*ckpt, run.cfg, run.world);
  return ckpt;
}

// Backend and admission (memory_admission.h), then (build_state) the data loader (it maps both
// shards after checking their headers and checksum tables) and model state: memory only,
// nothing on disk changes.
void build_backend(TrainRun& run, Comm& comm) {
  const RunConfig& cfg = run.cfg;
  BackendOptions bo;
  bo.threads = threads_per_rank(cfg.train.threads, comm.local_world());
  // Before the backend exists: it applies the mode to its OpenMP threads, and the threads this
  // process starts later (offload I/O, the collective watchdogs) adopt it.
  subnormals_set_process(cfg.precision.subnormals == "flush");
  run.backend = backend_create(cfg.train.device, bo);
  // Before anything big is allocated (the backend is created first: the GEMM library it picks
  // sizes its scratch): a run this host cannot hold is refused here, in one line.
  memory_admission_check(cfg, *run.backend, run.world, run.rank, comm.local_world(), run.lead());
}

// Data loader and model state on the backend, with the run's Comm (NCCL or the host one).
void build_state(TrainRun& run, Comm& comm) {
  const RunConfig& cfg = run.cfg;
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
  ModelStateOptions so;
  so.comm = &comm;
  run.state = std::make_unique<ModelState>(cfg, *run.backend, so);
}

// Weights and counters: from the checkpoint, from --init-from, or a fresh init (collective).
void load_start(TrainRun& run, const TrainRequest& cmd, const CheckpointReader* ckpt) {
  ModelState& state = *run.state;
  const uint64_t seed = static_cast<uint64_t>(run.cfg.train.seed);
  if (ckpt != nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    restore_frozen(state, *ckpt, seed);
    state.checkpoint_load(*ckpt);
    restore_scaler(*ckpt, state);
    restore_loop_state(*ckpt, &run.loop);
    run.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    run.resumed_from = ckpt->dir();
    run.resumed_bytes = ckpt->bytes();
  } else if (!cmd.init_from.empty()) {
    // Tensors the source lacks (LoRA adapters added to a base model) start from the seed's init.
    if (state.model_table().params.size() != state.table().params.size() ||
        run.cfg.model.lora.enabled())
      state.init_weights(seed);
    init_from(state, cmd.init_from);
  } else {
    state.init_weights(seed);
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
  if (!run.lead()) return;
  // A finished run resumed with its budget spent trains nothing (train_loop): left as it is.
  if (run.finished) return;
  run_summary_remove(run.run_dir);  // written again when this job ends
  if (run.resuming()) {
    const int64_t broken = run_metrics_truncate(run.run_dir, run.loop.step);
    if (broken > 0)
      std::printf("resume: dropped %lld unreadable line(s) from %s/metrics.jsonl\n",
                  static_cast<long long>(broken), run.run_dir.c_str());
    if (tb_truncate(run.run_dir, run.loop.step) > 0)
      std::printf(
          "resume: dropped an unreadable record and what followed it from %s's "
          "TensorBoard event file\n",
          run.run_dir.c_str());
  } else {
    fs::remove(run.run_dir + "/metrics.jsonl");
    for (const std::string& events : tb_event_files(run.run_dir)) fs::remove(events);
    if (run.cfg.train.overwrite) fs::remove_all(run.run_dir + "/ckpt");
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

void run_resolve_attention(RunConfig* cfg, bool print) {
  attention_config_check(cfg->precision.attention, cfg->train.device, cfg->precision.matmul,
                         cfg->model.dropout);
  const std::string& asked = cfg->precision.attention;
  std::string problem, version;
  if (attention_needs_cudnn(asked, cfg->train.device, cfg->precision.matmul, cfg->model.dropout)) {
    problem = backend_cudnn_attention_problem();
    if (problem.empty()) version = cudnn_version_text(cudnn_library().version);
  }
  const AttentionChoice choice = attention_resolve(asked, cfg->train.device, cfg->precision.matmul,
                                                   cfg->model.dropout, problem, version);
  if (print && !choice.note.empty()) std::printf("%s\n", choice.note.c_str());
  cfg->precision.attention = choice.value;
}

TrainRun run_setup(const TrainRequest& cmd, Comm& comm) {
  TrainRun run;
  run.comm = &comm;
  run.world = comm.world();
  run.rank = comm.rank();
  run.print_tensors = cmd.print_tensors;
  run.cfg = cmd.run;
  RunConfig& cfg = run.cfg;
  static_assert(CommWatch::kFloorFactor == 5.0,
                "the help of dist.timeout_s (config_keys.cpp) and README state the factor");
  // The collectives wait this run's dist.timeout_s since this rank read its config (cli.cpp),
  // so a rank hung reading the data (a stalled filesystem) ends the job within it too. A value
  // that validate() refuses below waited the default; a rank with another value is refused by
  // check_same_config, which already waits with it.
  test_stop_in(run.rank, "startup");  // as the rank begins reading the data
  // Everything that reads input comes first: config, data (meta.json, tokenizer, shards).
  comm_agree(comm, [&] {
    // Before the data is resolved: an adopted vocab_size is checked against the data's.
    const std::vector<std::string> taken =
        init_from_architecture(cmd.init_from, cmd.explicit_keys, &cfg);
    if (run.lead() && !taken.empty()) {
      std::string list;
      for (const std::string& t : taken) list += (list.empty() ? "" : ", ") + t;
      std::printf("--init-from %s: %s (from its config.toml)\n", cmd.init_from.c_str(),
                  list.c_str());
    }
    // A vocab taken from the run that the data does not have: say so in those terms (the
    // generic message would suggest model.vocab_size = 0, which takes the run's again).
    const bool took_vocab = std::any_of(taken.begin(), taken.end(), [](const std::string& t) {
      return t.rfind("model.vocab_size =", 0) == 0;
    });
    if (took_vocab) {
      const DataMeta data = meta_read(cfg.data.dir);
      // A padded embedding (more rows than the tokenizer has ids, Qwen2.5) takes data of the
      // tokenizer the source run records, and only that.
      const std::string source_tokenizer = run_load_config(cmd.init_from).data.tokenizer_id;
      if (data.vocab_size < cfg.model.vocab_size && !source_tokenizer.empty() &&
          source_tokenizer == data_tokenizer_id(cfg.data.dir, data)) {
        cfg.data.tokenizer_id = source_tokenizer;
      } else {
        LLM_REQUIRE(data.vocab_size == cfg.model.vocab_size, "--init-from '", cmd.init_from,
                    "': its model has vocab ", cfg.model.vocab_size, " but the data in '",
                    cfg.data.dir, "' has vocab ", data.vocab_size,
                    " (prepare the data with the model's tokenizer)");
      }
    }
    run.meta = run_resolve_data(&cfg);
    cfg.validate();
    // The run records the device it ran on (config.toml, checkpoints), not "auto".
    const std::string asked = cfg.train.device;
    cfg.train.device = backend_resolve(asked);
    if (run.lead() && asked != cfg.train.device)
      std::printf("train.device = %s: training on %s\n", asked.c_str(), cfg.train.device.c_str());
    // The same for precision.attention: the run records cudnn or own.
    run_resolve_attention(&cfg, run.lead());
    // The optimizer's advice on its settings (an LR on another optimizer's scale, ...).
    const OptimTraits* traits = optim_traits_find(cfg.optim.name);
    if (run.lead() && traits != nullptr && traits->notes != nullptr)
      for (const std::string& note : traits->notes(cfg.optim))
        std::printf("note: %s\n", note.c_str());
    check_command(cmd, cfg);
  });
  check_same_config(comm, cfg);
  check_same_data(comm, cfg, run.meta);
  run.stage = zero_stage_effective(cfg, run.world);
  run.run_dir = run_dir_path(cfg);
  // Rank 0 decides whether the run exists and locks it; every rank then reads its checkpoint.
  std::string existed_text;
  comm_agree(comm, [&] {
    if (!run.lead()) return;
    const bool existed = run_dir_check_reuse(cfg, cfg.train.overwrite || !cmd.resume.empty());
    if (existed) lock_run(run, cmd);  // before its checkpoints are read
    existed_text = std::string(existed ? "1" : "0");
  });
  const bool existed = comm.all_gather_text(existed_text).front() == "1";
  std::optional<CheckpointReader> ckpt;
  comm_agree(comm, [&] { ckpt = open_resume(run, cmd); });
  const std::string differs =
      disagreement(comm, "checkpoint to resume", ckpt ? ckpt->dir() : std::string());
  if (!differs.empty())
    throw AgreedError(differs + " (several hosts need train.out_dir on a shared filesystem)");
  comm_agree(comm, [&] { build_backend(run, comm); });
  // The Comm for device tensors (dist.comm): the host one, or NCCL over it (collective).
  comm_agree(comm, [&] {
    run.comm = &comm_for_run(cfg.dist.comm, cfg.train.device, comm, *run.backend, &run.device_comm);
  });
  comm_agree(comm, [&] { build_state(run, *run.comm); });
  load_start(run, cmd, ckpt ? &*ckpt : nullptr);
  run.state->model().plan(cfg.train.micro_batch, cfg.train.seq_len);
  // The token blocks the first step and the first evaluation read are verified now (a shard's
  // blocks are checked on first read): a damaged shard there is refused before the run
  // directory changes; damage elsewhere is reported when a later step reaches it.
  comm_agree(comm, [&] {
    run.loader->read_first(run.loop.step, cfg.train.seq_len,
                           run.meta.val.tokens > 0 ? cfg.train.eval_windows : 0);
  });
  comm_agree(comm, [&] {
    run.ledger = std::make_unique<RunLedger>(cfg, *run.state, run.world, run.rank);
  });

  // Only now does the run directory change. A directory this start made is removed again if the
  // start fails, but only once its lock is ours (another job may have taken it in between).
  std::optional<CreatedRunDir> created;
  comm_agree(comm, [&] {
    if (existed || !run.lead()) return;
    run_dir_create(run.run_dir);
    lock_run(run, cmd);
    created.emplace(run.run_dir);
  });
  comm_agree(comm, [&] {
    LLM_REQUIRE(fs::is_directory(run.run_dir), "run directory '", run.run_dir,
                "' is not visible on this rank (several hosts need train.out_dir on a shared "
                "filesystem)");
  });
  // Rank 0 reads the run's files; every rank agrees on whether there is anything left to do.
  const bool finished = run.lead() && run.resuming() && loop_budget_spent(cfg.train, run.loop) &&
                        run_summary_finished_at(run.run_dir, run.loop.step);
  run.finished = comm.all_gather_text(std::string(finished ? "1" : "0")).front() == "1";
  comm_agree(comm, [&] {
    reset_run_dir(run);
    if (run.lead()) {
      run_write_config(run.run_dir, cfg);
      run_tokenizer_save(run.run_dir, cfg.data.dir);  // eval, sample, export: the run alone
    }
    run.state->offload_settle();
  });
  if (created) created->keep();
  return run;
}

}  // namespace ledgerlm
