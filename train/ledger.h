// The memory ledger of a run: predicted before training (from the config and the parameter
// table, per component: dtype, bytes per parameter, total and per-rank bytes; activations for
// (B, T, recompute); predicted peak), measured during it (tracking allocator, per component
// current/peak) and reconciled with an independent figure (process RSS high-water mark).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "train/model_state.h"
#include "train/run_config.h"

namespace ledgerlm {

class RunLedger {
 public:
  RunLedger(const RunConfig& config, ModelState& state, int world, int rank);
  ~RunLedger();
  // Printed by `ledgerlm train` at start.
  void print_prediction() const;
  // Adds the measured figures ("mem") to a metrics record.
  void add_measured(nlohmann::json* record) const;
  // Prints measured vs predicted and writes RUN_DIR/ledger.json (both).
  void finish(const std::string& run_dir) const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace ledgerlm
