// Memory ledger (see ledger.h): the planner's prediction for the run's exact configuration, the
// tracker's measurement, and the reconciliation with the process's RSS high-water mark.
#include "train/ledger/ledger.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "model/base/atomic_file.h"
#include "model/base/check.h"
#include "optim/optim_groups.h"
#include "train/ledger/tensor_states.h"

namespace ledgerlm {
namespace {

int64_t read_rss() {
  int64_t rss = -1, hwm = -1;
  return process_rss_bytes(&rss, &hwm) ? rss : -1;
}

// Taken during static initialization, before main allocates anything tracked: the baseline of
// "growth over the run" that the trainer does not control.
const int64_t g_start_rss = read_rss();

double rel_error(int64_t predicted, int64_t measured) {
  if (measured == 0) return predicted == 0 ? 0.0 : INFINITY;
  return static_cast<double>(predicted - measured) / static_cast<double>(measured);
}

}  // namespace

int64_t ledger_process_start_rss() {
  return g_start_rss;
}

bool ledger_reset_hwm() {
  FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

LedgerReconcile ledger_reconcile(const MemoryTracker& tracker, int64_t rss_baseline) {
  LedgerReconcile r;
  r.rss_baseline = rss_baseline;
  process_rss_bytes(&r.rss, &r.hwm);
  r.tracked_peak = tracker.total().peak;
  if (r.hwm >= 0 && rss_baseline >= 0) {
    r.growth = r.hwm - rss_baseline;
    r.untracked = r.growth - r.tracked_peak;
  }
  return r;
}

void ledger_check_optimizer(const MemoryPlan& plan, const std::vector<StateComponent>& allocated,
                            int rank) {
  std::map<std::string, int64_t> got, want;
  std::map<std::string, std::string> group;
  for (const StateComponent& c : allocated) {
    const std::string key =
        c.scratch ? (c.tag == MemTag::kComm ? "comm.muon" : "workspace.muon") : "optim." + c.name;
    got[key] += c.bytes;
    group[key] = c.group;
  }
  for (const PlanComponent& c : plan.components) {
    const bool state = c.optimizer && c.tag != MemTag::kMaster;
    if (state || c.name == "comm.muon" || c.name == "workspace.muon") {
      want[c.name] += c.per_rank_bytes;
      if (state) group[c.name] = c.group;
    }
  }
  for (const auto& [name, bytes] : got) want.try_emplace(name, 0);
  for (const auto& [name, bytes] : want) {
    const int64_t have = got.count(name) ? got.at(name) : 0;
    LLM_REQUIRE(have == bytes, "memory ledger: optimizer component '", name, "' (group ",
                group[name], ") on rank ", rank, ": allocated ", have, " bytes, the plan predicts ",
                bytes, " (the optimizer and the table disagree)");
  }
}

void ledger_check_tensor_states(const PlanInput& in, const PlacementTable& placement,
                                const std::vector<StateView>& views, const ParamTable& table) {
  const auto have = tensor_states_of_views(views, table.params.size());
  for (const TensorPlacement& tp : placement.tensors) {
    const size_t i = static_cast<size_t>(tp.param);
    std::vector<TensorState> want;
    if (tp.group != kFrozenGroup && tp.state.count > 0 && i < in.tensors.size())
      want = plan_tensor_states(in.optim, in.tensors[i], tp.state.count);
    bool same = want.size() == have[i].size();
    for (size_t k = 0; same && k < want.size(); ++k)
      same = want[k].name == have[i][k].name && want[k].dtype == have[i][k].dtype &&
             want[k].elements == have[i][k].elements;
    LLM_REQUIRE(same, "memory ledger: tensor '", table.params[i].name, "' on rank ", placement.rank,
                " has optimizer state ", tensor_states_text(have[i]),
                ", the per-tensor table says ", tensor_states_text(want));
  }
}

std::vector<LedgerRow> ledger_compare(const MemoryPlan& plan, const MemoryTracker& tracker) {
  std::vector<LedgerRow> rows;
  for (size_t i = 0; i < kMemTagCount; ++i) {
    const MemTag tag = static_cast<MemTag>(i);
    LedgerRow row;
    row.tag = tag;
    row.predicted = plan.per_rank_for_tag(tag);
    const MemUsage u = tracker.usage(tag);
    row.current = u.current;
    row.peak = u.peak;
    if (row.predicted == 0 && row.peak == 0) continue;
    row.error = rel_error(row.predicted, row.peak);
    rows.push_back(row);
  }
  return rows;
}

nlohmann::json ledger_measured_json(const MemoryPlan& plan, const MemoryTracker& tracker,
                                    const LedgerReconcile& rec) {
  nlohmann::json mem = nlohmann::json::object();
  auto err = [](double e) {
    return std::isfinite(e) ? nlohmann::json(e) : nlohmann::json(nullptr);
  };
  for (const LedgerRow& r : ledger_compare(plan, tracker))
    mem[mem_tag_name(r.tag)] = {{"location", "device"},
                                {"current", r.current},
                                {"peak", r.peak},
                                {"predicted", r.predicted},
                                {"error", err(r.error)}};
  const MemUsage total = tracker.total();
  mem["total"] = {{"current", total.current},
                  {"peak", total.peak},
                  {"predicted", plan.per_rank_peak},
                  {"error", err(rel_error(plan.per_rank_peak, total.peak))}};
  mem["process"] = {{"rss", rec.rss},
                    {"hwm", rec.hwm},
                    {"rss_baseline", rec.rss_baseline},
                    {"growth", rec.growth},
                    {"untracked", rec.untracked}};
  return mem;
}

std::string ledger_format_comparison(const MemoryPlan& plan, const MemoryTracker& tracker,
                                     const LedgerReconcile& rec) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %14s %14s %14s %9s\n", "measured (MB)", "current", "peak",
                "predicted", "error");
  out += line;
  auto row = [&](const char* name, int64_t cur, int64_t peak, int64_t pred) {
    const double e = rel_error(pred, peak);
    char err[32] = "-";
    if (std::isfinite(e)) std::snprintf(err, sizeof err, "%+.2f%%", 100.0 * e);
    std::snprintf(line, sizeof line, "%-16s %14.3f %14.3f %14.3f %9s\n", name, cur / kBytesPerMB,
                  peak / kBytesPerMB, pred / kBytesPerMB, err);
    out += line;
  };
  for (const LedgerRow& r : ledger_compare(plan, tracker))
    row(mem_tag_name(r.tag), r.current, r.peak, r.predicted);
  const MemUsage total = tracker.total();
  row("total (peak)", total.current, total.peak, plan.per_rank_peak);
  if (rec.hwm >= 0 && rec.rss_baseline >= 0) {
    std::snprintf(line, sizeof line,
                  "process: VmHWM %.3f MB, growth since start %.3f MB, tracked peak %.3f MB, "
                  "untracked %.3f MB\n",
                  rec.hwm / kBytesPerMB, rec.growth / kBytesPerMB, rec.tracked_peak / kBytesPerMB,
                  rec.untracked / kBytesPerMB);
    out += line;
  }
  return out;
}

struct RunLedger::Impl {
  ModelState* state;
  MemoryPlan plan;
  int world = 1, rank = 0;
  int64_t rss_at_ledger = -1, hwm_at_ledger = -1;
};

RunLedger::RunLedger(const RunConfig& config, ModelState& state, int world, int rank)
    : impl_(new Impl{&state, {}, world, rank}) {
  // The planner predicts the run from the config alone (its own formulas over the parameter
  // table); the trainer's allocations are what the tracker measures.
  const PlanInput in = plan_input_from_config(config, world, state.backend().num_threads(),
                                              plan_data_bytes(config.data.dir), rank);
  impl_->plan = memory_plan_compute(in);
  ledger_check_optimizer(impl_->plan, state.optimizer().state_components(), rank);
  ledger_check_tensor_states(impl_->plan.input, state.placement(), state.optimizer().state_views(),
                             state.table());
  process_rss_bytes(&impl_->rss_at_ledger, &impl_->hwm_at_ledger);
}

RunLedger::~RunLedger() {
  delete impl_;
}

const MemoryPlan& RunLedger::plan() const {
  return impl_->plan;
}

std::string RunLedger::describe_tensors() const {
  ModelState& state = *impl_->state;
  std::vector<std::string> groups, text;
  for (const OptimGroup& g : optim_groups(state.config().optim)) groups.push_back(g.name);
  for (const auto& states :
       tensor_states_of_views(state.optimizer().state_views(), state.table().params.size()))
    text.push_back(tensor_states_text(states));
  return placement_describe(state.placement(), state.table(), groups, {}, text) +
         placement_describe_frozen(state.frozen_table());
}

void RunLedger::print_prediction() const {
  std::printf("%s", memory_plan_format(impl_->plan).c_str());
}

void RunLedger::add_measured(nlohmann::json* record) const {
  MemoryTracker& tracker = impl_->state->backend().tracker();
  const LedgerReconcile rec = ledger_reconcile(tracker, ledger_process_start_rss());
  (*record)["mem"] = ledger_measured_json(impl_->plan, tracker, rec);
}

void RunLedger::finish(const std::string& run_dir) const {
  MemoryTracker& tracker = impl_->state->backend().tracker();
  const LedgerReconcile rec = ledger_reconcile(tracker, ledger_process_start_rss());
  std::printf("%s", ledger_format_comparison(impl_->plan, tracker, rec).c_str());
  nlohmann::json j;
  j["format"] = "ledgerlm-ledger";
  // Version 2: component rows carry group, trainable and location (memory_plan.h).
  j["format_version"] = 2;
  j["world"] = impl_->world;
  j["rank"] = impl_->rank;
  j["predicted"] = memory_plan_json(impl_->plan);
  j["measured"] = ledger_measured_json(impl_->plan, tracker, rec);
  j["measured"]["process"]["rss_start"] = ledger_process_start_rss();
  j["measured"]["process"]["rss_at_ledger_start"] = impl_->rss_at_ledger;
  j["measured"]["process"]["hwm_at_ledger_start"] = impl_->hwm_at_ledger;
  // Checkpoint sizes: the prediction and, where the trainer wrote it, the weights file's size.
  nlohmann::json ck = {{"predicted_weights_only_bytes", impl_->plan.ckpt_weights_bytes},
                       {"predicted_full_state_bytes", impl_->plan.ckpt_full_bytes}};
  std::error_code ec;
  const auto size = std::filesystem::file_size(run_dir + "/model.safetensors", ec);
  if (!ec) ck["model_safetensors_bytes"] = static_cast<int64_t>(size);
  j["checkpoint"] = ck;
  // A device backend: the driver's bytes in use (less those in use before the backend existed)
  // against the tracker's current bytes; the difference is what the tracker does not see
  // (cuBLAS handles, kernel modules, allocation rounding).
  DeviceMemoryInfo dev;
  if (impl_->state->backend().device_memory(&dev)) {
    const int64_t tracked = tracker.total().current, used = dev.used - dev.baseline;
    std::printf(
        "device memory (driver): %.1f MB in use by this run, tracked %.1f MB now "
        "(peak %.1f MB), untracked %.1f MB, device total %.1f MB\n",
        used / 1e6, tracked / 1e6, tracker.total().peak / 1e6, (used - tracked) / 1e6,
        dev.total / 1e6);
    j["measured"]["device"] = {{"used", dev.used},
                               {"baseline", dev.baseline},
                               {"total", dev.total},
                               {"tracked_current", tracked},
                               {"untracked", used - tracked}};
  }
  write_file_atomic(run_dir + "/ledger.json", j.dump(2) + "\n");
}

}  // namespace ledgerlm
