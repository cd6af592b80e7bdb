// Admission of a run by its predicted memory (see memory_admission.h).
#include "train/run/memory_admission.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "model/base/check.h"
#include "train/ledger/plan_layers.h"

namespace ledgerlm {

AdmissionFigures admission_figures(const MemoryPlan& plan, int64_t local_ranks,
                                   const std::vector<MemoryLimit>& limits) {
  AdmissionFigures f;
  f.per_rank_peak = plan.per_rank_peak;
  f.allowance =
      kAdmissionAllowanceBytes +
      static_cast<int64_t>(kAdmissionAllowanceFraction * static_cast<double>(plan.per_rank_peak));
  f.local_ranks = std::max<int64_t>(1, local_ranks);
  // Saturates rather than overflows: a prediction this large is refused anyway.
  const double needed =
      static_cast<double>(f.per_rank_peak + f.allowance) * static_cast<double>(f.local_ranks);
  f.needed = needed >= 9.2e18 ? INT64_MAX : static_cast<int64_t>(needed);
  f.tightest = host_memory_tightest(limits);
  return f;
}

std::string admission_refusal(const AdmissionFigures& f, const MemoryPlan& plan,
                              const RunConfig& config) {
  std::string fixes;
  auto fix = [&](const std::string& text) { fixes += (fixes.empty() ? "" : ", ") + text; };
  const int64_t acts = plan.per_rank_for_tag(MemTag::kActivations);
  if (config.model.recompute != "block")
    fix("--model.recompute block (activations are " + format_bytes(acts) + ")");
  if (config.train.micro_batch > 1)
    fix("a smaller --train.micro_batch (with --train.accum to keep the batch)");
  if (config.dist.zero < 3) fix("ZeRO (--dist.zero 1..3) over more ranks or hosts");
  if (config.precision.params == "fp32") fix("--precision.params bf16");
  fix("a smaller model");
  const std::string ranks =
      f.local_ranks > 1 ? " x " + std::to_string(f.local_ranks) + " ranks on this host" : "";
  return error_message("memory: this run needs ", format_bytes(f.needed), " (predicted peak ",
                       format_bytes(f.per_rank_peak), " per rank + ", format_bytes(f.allowance),
                       " allowance for untracked memory", ranks, ") but ",
                       format_bytes(f.tightest.available), " is available (", f.tightest.source,
                       "); to need less: ", fixes,
                       "; or --train.memory_check false to start anyway");
}

AdmissionFigures memory_admission_check(const RunConfig& config, Backend& backend, int world,
                                        int rank, int local_ranks, bool print) {
  const MemoryPlan plan = memory_plan_for_config(config, world, backend.num_threads(),
                                                 plan_data_bytes(config.data.dir), rank);
  std::vector<MemoryLimit> limits = host_memory_limits();
  DeviceMemoryInfo device;
  if (backend.device_memory(&device)) {
    // The host's limits do not bound device memory; the stated limit still applies.
    std::erase_if(limits,
                  [](const MemoryLimit& l) { return l.source != "LEDGERLM_MEMORY_LIMIT_BYTES"; });
    limits.push_back({"free device memory (driver)", device.total - device.used, device.total});
    local_ranks = 1;  // one device per rank
  }
  const AdmissionFigures f = admission_figures(plan, local_ranks, limits);
  if (f.fits()) return f;
  const std::string line = admission_refusal(f, plan, config);
  LLM_REQUIRE(!config.train.memory_check, line);
  if (print)
    std::printf(
        "train.memory_check = false: starting anyway, although this run needs %s and %s "
        "is available (%s)\n",
        format_bytes(f.needed).c_str(), format_bytes(f.tightest.available).c_str(),
        f.tightest.source.c_str());
  return f;
}

}  // namespace ledgerlm
