// What a run's checkpoint holds besides the tensors, and what resuming checks: the loop's
// counters, the checkpoint meta.json record, the config comparison that refuses architecture
// changes, and where --resume / --init-from point.
//
// Resume is bit-exact because nothing random or scheduled carries hidden state: the data order,
// dropout and stochastic rounding are counter-based functions of (seed, step, sequence, ...),
// the LR is a function of the step, and everything else (weights, every optimizer state, the loss
// scaler, the counters) is in the checkpoint.
#pragma once

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "train/config/run_config.h"
#include "train/ledger/ledger.h"
#include "train/step/model_state.h"

namespace ledgerlm {

// Counters of the training loop that a checkpoint carries.
struct LoopState {
  int64_t step = 0;
  int64_t tokens = 0;
  double train_seconds = 0.0;
  int64_t skipped = 0;
  double best_val = INFINITY, best_bpb = INFINITY, last_val = NAN;
};

// True when the loop counters have reached any of the configured budgets.
inline bool loop_budget_spent(const TrainConfig& t, const LoopState& ls) {
  return (t.max_steps > 0 && ls.step >= t.max_steps) ||
         (t.max_tokens > 0 && ls.tokens >= t.max_tokens) ||
         (t.max_seconds > 0 && ls.train_seconds >= t.max_seconds);
}

// "fp32", "none" or "fp32 (= params)": what precision.master means for this run.
const char* master_text(const PrecisionPlan& plan);

// The meta.json record of a checkpoint at the loop's current step.
nlohmann::json checkpoint_meta(const RunConfig& cfg, ModelState& state, const LoopState& ls,
                               const RunLedger& ledger, int world);

// Checks that `cfg` may continue the run saved in `ckpt` (architecture and optimizer keys must
// match); returns the keys that changed as {"key": {"from": .., "to": ..}} (logged on resume).
nlohmann::json resume_check_config(const CheckpointReader& ckpt, const RunConfig& cfg);

// The global batch (world x micro-batch x accum, in sequences) of the run saved in `ckpt` and of
// `cfg` on `world` ranks, as {"from", "to", "world", "micro_batch", "accum"} (each part
// "A->B"), or null when it stays the same (or the checkpoint does not record it). The world size
// is no config key, so a change of ranks would otherwise go unmentioned.
nlohmann::json resume_global_batch_change(const CheckpointReader& ckpt, const RunConfig& cfg,
                                          int world);

// Restores the loop counters and the loss scaler saved in `ckpt`.
void restore_loop_state(const CheckpointReader& ckpt, LoopState* ls);
void restore_scaler(const CheckpointReader& ckpt, ModelState& state);

// --init-from: the weights of a weights file, a run directory (its model.safetensors) or a
// checkpoint.
void init_from(ModelState& state, const std::string& path);
// Resume of a run with frozen tensors: rebuilds them as its start did (the seed's init, then the
// recorded --init-from source) and refuses base weights whose sha256 differs from the
// checkpoint's record. Nothing to do without frozen tensors.
void restore_frozen(ModelState& state, const CheckpointReader& ckpt, uint64_t seed);

// --init-from a run directory (one with config.toml: trained or imported) starts from that run's
// architecture: each of model.n_layer, n_head, n_embd, block_size and vocab_size that
// `explicit_keys` does not name (or, for vocab_size, that is 0: "take it from elsewhere") takes
// the run's value; one set to a different value is refused with one line. Returns the keys
// taken as "key = value". A weights file or a checkpoint directory changes nothing: the model
// keys must then match its shapes, as load_weights checks.
std::vector<std::string> init_from_architecture(const std::string& path,
                                                const std::set<std::string>& explicit_keys,
                                                RunConfig* cfg);

// The checkpoint --resume names: a path, or with "auto" the run's latest ("" when the run has
// none yet and never trained).
std::string resume_source(const std::string& resume, const std::string& run_dir);

// JSON has no inf/nan: they travel as null.
nlohmann::json finite_or_null(double v);

}  // namespace ledgerlm
