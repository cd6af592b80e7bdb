// The setup of `ledgerlm train`: everything a run holds before its first step, built in an order
// that changes nothing on disk until every input has been checked — config and data (meta.json,
// tokenizer, both shards) first; then the run's lock (run_lock.h) when the run directory exists,
// the checkpoint to resume (format, checksums, sizes, config compatibility), the backend, the
// data loader and the model state with its weights; and only then the run directory (created and
// locked for a new run, removed again if the start fails after creating it), its metrics and
// config.toml.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "data/loader.h"
#include "data/meta.h"
#include "model/backend/backend.h"
#include "train/commands.h"
#include "train/model_state.h"
#include "train/run_checkpoint.h"
#include "train/run_lock.h"

namespace ledgerlm {

struct TrainRun {
  // Held for the job's whole life by rank 0 (null on other ranks); declared first, so it is
  // released last.
  std::unique_ptr<RunLock> lock;
  RunConfig cfg;  // resolved (vocab from the data, data.dir absolute)
  DataMeta meta;
  std::string run_dir;
  int world = 1, rank = 0;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<DataLoader> loader;
  std::unique_ptr<ModelState> state;
  LoopState loop;  // restored counters when resuming, zero otherwise
  // Resume: the checkpoint directory, its size, the load time and the config keys that changed.
  std::string resumed_from;
  int64_t resumed_bytes = 0;
  double load_seconds = 0.0;
  nlohmann::json changed = nlohmann::json::object();

  bool resuming() const { return !resumed_from.empty(); }
  int64_t tokens_per_step() const {
    return static_cast<int64_t>(world) * cfg.train.micro_batch * cfg.train.accum *
           cfg.train.seq_len;
  }
};

TrainRun run_setup(TrainCommand& cmd);

}  // namespace ledgerlm
