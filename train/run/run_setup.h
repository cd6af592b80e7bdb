// The setup of `ledgerlm train`: everything a run holds before its first step, built in an order
// that changes nothing on disk until every input has been checked — config and data (meta.json,
// tokenizer, both shards) first; then the run's lock (run_lock.h) when the run directory exists,
// the checkpoint to resume (format, checksums, sizes, config compatibility), the backend, the
// data loader, the model state with its weights and the ledger (its planner checks, and under
// optim.offload = disk its probe of the device); and only then the run directory (created and
// locked for a new run, removed again if the start fails after creating it), its metrics and
// config.toml.
//
// Under mpirun every rank validates config, data and checkpoint itself; a failure on any rank,
// or a rank whose resolved config, data or checkpoint differs from rank 0's, is one error on
// all of them (comm_agree) before anything is written. Rank 0 alone holds the lock and creates
// and writes the run directory; the others must see it (several hosts: train.out_dir on a
// shared filesystem).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "data/loader.h"
#include "data/meta.h"
#include "model/backend/backend.h"
#include "train/comm/comm.h"
#include "train/ledger/ledger.h"
#include "train/run/run_checkpoint.h"
#include "train/run/run_lock.h"
#include "train/run/train_request.h"
#include "train/step/model_state.h"

namespace ledgerlm {

struct TrainRun {
  // Held for the job's whole life by rank 0 (null on other ranks); declared first, so it is
  // released last.
  std::unique_ptr<RunLock> lock;
  RunConfig cfg;  // resolved (vocab from the data, data.dir absolute)
  DataMeta meta;
  std::string run_dir;
  Comm* comm = nullptr;
  int world = 1, rank = 0;
  int stage = 0;  // ZeRO stage in effect (zero_stage_effective)
  std::unique_ptr<Backend> backend;
  // The NCCL Comm over the host one when dist.comm chose it (then `comm` points to it); declared
  // after the backend, whose stream it uses, and before the state, which holds `comm`.
  std::unique_ptr<Comm> device_comm;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<ModelState> state;
  // Built with the state, before the run directory changes: it can fail (a device that cannot
  // be written under optim.offload = disk). Declared after the state, which it refers to.
  std::unique_ptr<RunLedger> ledger;
  LoopState loop;  // restored counters when resuming, zero otherwise
  // Resume: the checkpoint directory, its size, the load time and the config keys that changed.
  std::string resumed_from;
  int64_t resumed_bytes = 0;
  double load_seconds = 0.0;
  nlohmann::json changed = nlohmann::json::object();
  nlohmann::json batch_changed;  // resume_global_batch_change(), null when the same
  bool print_tensors = false;    // TrainRequest::print_tensors
  // Resumed at a spent budget and already finished (run_summary_finished_at): nothing to train
  // or write. At a spent budget but not finished (killed after its final checkpoint), the job
  // trains no step and writes the weights and the summary.
  bool finished = false;

  bool resuming() const { return !resumed_from.empty(); }
  bool lead() const { return rank == 0; }  // prints and writes the run's files
  int64_t tokens_per_step() const {
    return static_cast<int64_t>(world) * cfg.train.micro_batch * cfg.train.accum *
           cfg.train.seq_len;
  }
};

TrainRun run_setup(const TrainRequest& request, Comm& comm);

// CPU threads per rank for train.threads = 0: the cores of this host shared by its ranks.
int threads_per_rank(int64_t configured, int local_ranks);

// precision.attention resolved for cfg's resolved train.device (attention_choice.h): checks it
// again, asks the build and libcudnn only where cuDNN is a candidate, stores cudnn | own in
// cfg and prints the resolution's line when `print` and there is one.
void run_resolve_attention(RunConfig* cfg, bool print);

}  // namespace ledgerlm
