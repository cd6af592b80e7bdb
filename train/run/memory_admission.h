// Admission: before `ledgerlm train` allocates the model, compare what the memory planner
// predicts this host will need with what the host can give, and refuse a run that cannot fit in
// one line instead of letting it allocate for a minute and die on one buffer (or be killed).
//
// Needed on this host = (predicted per-rank peak + allowance) x the ranks sharing the host
// (Comm::local_world). The allowance covers what the ledger does not track but the process still
// grows by (its "untracked" figure: allocator overhead, thread stacks, the GEMM libraries' own
// buffers and JIT code, MPI's buffers): kAdmissionAllowanceBytes plus
// kAdmissionAllowanceFraction of the prediction. Available = the tightest of host_memory_limits().
// train.memory_check = false starts the run anyway (and says by how much it exceeds).
#pragma once

#include <cstdint>
#include <string>

#include "model/backend/backend.h"
#include "train/config/run_config.h"
#include "train/ledger/memory_plan.h"
#include "train/run/host_memory.h"

namespace ledgerlm {

// Measured untracked growth: ~3-10 MB on bench_tiny, see README "Memory ledger"; 128 MB and 5%
// leave room for thread stacks of many cores and for MPI's shared-memory segments.
constexpr int64_t kAdmissionAllowanceBytes = 128000000;
constexpr double kAdmissionAllowanceFraction = 0.05;

struct AdmissionFigures {
  int64_t per_rank_peak = 0;  // the planner's
  int64_t allowance = 0;      // per rank
  int64_t local_ranks = 1;
  int64_t needed = 0;  // (peak + allowance) x local ranks
  MemoryLimit tightest;
  bool fits() const { return tightest.source.empty() || needed <= tightest.available; }
};

AdmissionFigures admission_figures(const MemoryPlan& plan, int64_t local_ranks,
                                   const std::vector<MemoryLimit>& limits);

// One line: needed against available and which limit, and what to change in `config` to need
// less (the options that apply to it).
std::string admission_refusal(const AdmissionFigures& f, const MemoryPlan& plan,
                              const RunConfig& config);

// The check itself (rank `rank` of `world`, `local_ranks` on this host, the backend's threads):
// throws Error with admission_refusal's line when the run does not fit and
// config.train.memory_check is true; prints a note (when `print`) and returns when it is false.
// A device backend (Backend::device_memory) holds the model in its own memory: its driver's free
// memory is the limit then (plus LEDGERLM_MEMORY_LIMIT_BYTES), per rank (one device each).
AdmissionFigures memory_admission_check(const RunConfig& config, Backend& backend, int world,
                                        int rank, int local_ranks, bool print);

}  // namespace ledgerlm
