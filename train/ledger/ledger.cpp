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
  DiskBandwidth disk;  // optim.offload = disk: the device's measured bandwidth
};

namespace {

// optim.offload = disk: per tag, the files' bytes (their size and what the device allocated for
// them) and the bytes the page cache holds, against the planner's disk components.
struct DiskRow {
  MemTag tag = MemTag::kOther;
  int64_t predicted = 0, bytes = 0, allocated = 0, resident = 0;
};

std::vector<DiskRow> disk_rows(const MemoryPlan& plan, const OffloadPager& pager) {
  std::vector<DiskRow> rows;
  auto row_of = [&](MemTag tag) -> DiskRow& {
    for (DiskRow& r : rows)
      if (r.tag == tag) return r;
    rows.push_back({tag, 0, 0, 0, 0});
    return rows.back();
  };
  for (const PlanComponent& c : plan.components)
    if (c.location == "disk") row_of(c.tag).predicted += c.per_rank_bytes;
  for (const OffloadRegionInfo& r : pager.regions()) {
    DiskRow& row = row_of(r.tag);
    row.bytes += r.bytes;
    row.allocated += r.allocated;
    row.resident += std::max<int64_t>(r.resident, 0);
  }
  return rows;
}

nlohmann::json disk_json(const MemoryPlan& plan, const OffloadPager& pager) {
  nlohmann::json disk = nlohmann::json::object();
  for (const DiskRow& r : disk_rows(plan, pager))
    disk[mem_tag_name(r.tag)] = {
        {"location", "disk"},       {"bytes", r.bytes},
        {"allocated", r.allocated}, {"page_cached", r.resident},
        {"predicted", r.predicted}, {"error", rel_error(r.predicted, r.bytes)}};
  const OffloadStats st = pager.stats();
  disk["io"] = {{"bytes_read", st.bytes_read}, {"bytes_written", st.bytes_written},
                {"reads", st.reads},           {"writes", st.writes},
                {"read_s", st.read_s},         {"write_s", st.write_s},
                {"stall_s", st.stall_s},       {"hits", st.hits},
                {"misses", st.misses},         {"prefetched", st.prefetched}};
  return disk;
}

std::string disk_format(const MemoryPlan& plan, const OffloadPager& pager) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "%-16s %14s %14s %14s %9s %12s\n", "on disk (MB)", "file",
                "allocated", "predicted", "error", "page cache");
  out += line;
  int64_t cached = 0;
  for (const DiskRow& r : disk_rows(plan, pager)) {
    const double e = rel_error(r.predicted, r.bytes);
    char err[32] = "-";
    if (std::isfinite(e)) std::snprintf(err, sizeof err, "%+.2f%%", 100.0 * e);
    std::snprintf(line, sizeof line, "%-16s %14.3f %14.3f %14.3f %9s %12.3f\n", mem_tag_name(r.tag),
                  r.bytes / kBytesPerMB, r.allocated / kBytesPerMB, r.predicted / kBytesPerMB, err,
                  r.resident / kBytesPerMB);
    out += line;
    cached += r.resident;
  }
  const OffloadStats st = pager.stats();
  std::snprintf(line, sizeof line,
                "offload I/O: %.1f MB read in %.2fs, %.1f MB written in %.2fs; the step waited "
                "%.2fs; %.3f MB of the files in the page cache now\n",
                st.bytes_read / kBytesPerMB, st.read_s, st.bytes_written / kBytesPerMB, st.write_s,
                st.stall_s, cached / kBytesPerMB);
  out += line;
  return out;
}

}  // namespace

RunLedger::RunLedger(const RunConfig& config, ModelState& state, int world, int rank)
    : impl_(new Impl{&state, {}, world, rank, -1, -1, {}}) {
  // The planner predicts the run from the config alone (its own formulas over the parameter
  // table); the trainer's allocations are what the tracker measures.
  const PlanInput in = plan_input_from_config(config, world, state.backend().num_threads(),
                                              plan_data_bytes(config.data.dir), rank);
  impl_->plan = memory_plan_compute(in);
  ledger_check_optimizer(impl_->plan, state.optimizer().state_components(), rank);
  ledger_check_tensor_states(impl_->plan.input, state.placement(), state.optimizer().state_views(),
                             state.table());
  if (const OffloadPager* pager = state.offload_pager()) {
    // The device's own figures, for the step-time prediction: a probe of up to 64 MiB (the
    // state's size when smaller, at least 8 MiB) in pieces of the backend's staging size.
    const int64_t probe = std::clamp<int64_t>(impl_->plan.disk_per_rank, 8 << 20, 64 << 20);
    impl_->disk = pager->probe_bandwidth(probe, pager->staging_bytes() / 4);
  }
  process_rss_bytes(&impl_->rss_at_ledger, &impl_->hwm_at_ledger);
}

DiskBandwidth RunLedger::disk_bandwidth() const {
  return impl_->disk;
}

RunLedger::~RunLedger() = default;  // here, where Impl is complete

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
  const OffloadPager* pager = impl_->state->offload_pager();
  if (pager == nullptr) return;
  const DiskBandwidth& d = impl_->disk;
  const double mb = impl_->plan.disk_per_rank / kBytesPerMB;
  // One read and one write of every byte on disk per step; the read-ahead and the write-behind
  // overlap them with each other and with the update, so the I/O alone bounds the step below.
  const double io_ms = 1e3 * (mb / d.read_mb_s + mb / d.write_mb_s);
  std::printf(
      "offload: %.3f MB per rank in %s; staging %.1f MB of RAM; device measured (%.0f MiB "
      "probe, page cache dropped): write %.0f MB/s, read %.0f MB/s; reading and writing the state "
      "once per step takes %.1f ms at that bandwidth\n",
      mb, pager->dir().c_str(), pager->staging_bytes() / kBytesPerMB,
      static_cast<double>(d.probe_bytes) / (1 << 20), d.write_mb_s, d.read_mb_s, io_ms);
}

void RunLedger::add_measured(nlohmann::json* record) const {
  MemoryTracker& tracker = impl_->state->backend().tracker();
  const LedgerReconcile rec = ledger_reconcile(tracker, ledger_process_start_rss());
  (*record)["mem"] = ledger_measured_json(impl_->plan, tracker, rec);
  (*record)["mem"]["process"]["rss_anon"] = process_rss_anon_bytes();
  if (const OffloadPager* pager = impl_->state->offload_pager())
    (*record)["mem"]["disk"] = disk_json(impl_->plan, *pager);
}

void RunLedger::finish(const std::string& run_dir) const {
  MemoryTracker& tracker = impl_->state->backend().tracker();
  const LedgerReconcile rec = ledger_reconcile(tracker, ledger_process_start_rss());
  std::printf("%s", ledger_format_comparison(impl_->plan, tracker, rec).c_str());
  const OffloadPager* pager = impl_->state->offload_pager();
  if (pager != nullptr) {
    std::printf("%s", disk_format(impl_->plan, *pager).c_str());
    std::printf("process: RssAnon %.3f MB (predicted in-memory peak %.3f MB)\n",
                process_rss_anon_bytes() / kBytesPerMB, impl_->plan.per_rank_peak / kBytesPerMB);
  }
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
  j["measured"]["process"]["rss_anon"] = process_rss_anon_bytes();
  if (pager != nullptr) {
    j["measured"]["disk"] = disk_json(impl_->plan, *pager);
    j["measured"]["disk"]["bandwidth"] = {{"write_mb_s", impl_->disk.write_mb_s},
                                          {"read_mb_s", impl_->disk.read_mb_s},
                                          {"probe_bytes", impl_->disk.probe_bytes}};
  }
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
