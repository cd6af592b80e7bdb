// The memory ledger of a run: predicted before training (the planner's formulas, memory_plan.h,
// from the config and the parameter table: per component dtype, bytes per parameter, total and
// per-rank bytes; activations for (B, T, recompute); predicted peak), measured during it
// (tracking allocator, per component current/peak) and reconciled with an independent figure:
// the process's RSS high-water mark (VmHWM) and its growth since the process started.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/base/memory.h"
#include "train/config/run_config.h"
#include "train/ledger/memory_plan.h"
#include "train/offload/offload_file.h"
#include "train/step/model_state.h"

namespace ledgerlm {

// The process's RSS when ledger.cpp's static initializers ran (before main), -1 if unknown.
int64_t ledger_process_start_rss();
// Resets the kernel's RSS high-water mark to the current RSS (/proc/self/clear_refs), so a
// process can measure several runs one after another. False where the kernel refuses.
bool ledger_reset_hwm();

// Tracked bytes against the independent figure.
struct LedgerReconcile {
  int64_t rss_baseline = -1;  // RSS before the tracked allocations began
  int64_t rss = -1;           // now
  int64_t hwm = -1;           // VmHWM now
  int64_t growth = 0;         // hwm - rss_baseline: what the run added at its peak
  int64_t tracked_peak = 0;   // the tracker's peak of all tags together
  int64_t untracked = 0;      // growth - tracked_peak (allocator overhead, libraries, stacks)
};
LedgerReconcile ledger_reconcile(const MemoryTracker& tracker, int64_t rss_baseline);

// One tracker tag: the planner's per-rank prediction against the tracker's figures.
// The optimizer's allocations against the plan, component by component on this rank: every
// state ("optim.<name>", with its group) and Muon's scratch ("comm.muon", "workspace.muon") must
// be exactly the predicted bytes. Catches an optimizer that silently allocates other state than
// the table says (Muon running as plain momentum, 8-bit state become fp32, a per-tensor rule
// applied to shards). Throws an Error naming the component, both figures and the group.
void ledger_check_optimizer(const MemoryPlan& plan, const std::vector<StateComponent>& allocated,
                            int rank);

// The optimizer's state tensors against plan_tensor_states (tensor_states.h), tensor by tensor on
// this rank: names, dtypes and element counts must be the predicted ones. Throws an Error naming
// the tensor, what it has and what the table says.
void ledger_check_tensor_states(const PlanInput& in, const PlacementTable& placement,
                                const std::vector<StateView>& views, const ParamTable& table);

struct LedgerRow {
  MemTag tag = MemTag::kOther;
  int64_t predicted = 0;
  int64_t current = 0;
  int64_t peak = 0;
  double error = 0.0;  // (predicted - peak) / peak; 0 when both are 0
};
// Every tag with a prediction or a measurement, in tag order.
std::vector<LedgerRow> ledger_compare(const MemoryPlan& plan, const MemoryTracker& tracker);
// {"TAG": {current, peak, predicted, error}, ..., "total": {...}, "process": {...}}.
nlohmann::json ledger_measured_json(const MemoryPlan& plan, const MemoryTracker& tracker,
                                    const LedgerReconcile& rec);
// Measured vs predicted as a human table.
std::string ledger_format_comparison(const MemoryPlan& plan, const MemoryTracker& tracker,
                                     const LedgerReconcile& rec);

class RunLedger {
 public:
  RunLedger(const RunConfig& config, ModelState& state, int world, int rank);
  ~RunLedger();
  RunLedger(const RunLedger&) = delete;
  RunLedger& operator=(const RunLedger&) = delete;
  // Printed by `ledgerlm train` at start.
  void print_prediction() const;
  // This rank's placement table with the state tensors its optimizer allocated per tensor.
  std::string describe_tensors() const;
  // Adds the measured figures ("mem") to a metrics record.
  void add_measured(nlohmann::json* record) const;
  // Prints measured vs predicted and writes RUN_DIR/ledger.json (both).
  void finish(const std::string& run_dir) const;
  const MemoryPlan& plan() const;
  // optim.offload = disk: the offload device's bandwidth measured at start (zeros otherwise).
  DiskBandwidth disk_bandwidth() const;

 private:
  struct Impl;
  // Owned: a check in the constructor that throws (a refusal before step 1) must free it, which
  // a raw pointer released only by the destructor would not.
  std::unique_ptr<Impl> impl_;
};

}  // namespace ledgerlm
