// Memory ledger (see ledger.h). Initial version: measured figures only.
#include "train/ledger.h"

namespace ledgerlm {

struct RunLedger::Impl {
  ModelState* state;
};

RunLedger::RunLedger(const RunConfig&, ModelState& state, int, int) : impl_(new Impl{&state}) {}
RunLedger::~RunLedger() { delete impl_; }
void RunLedger::print_prediction() const {}

void RunLedger::add_measured(nlohmann::json* record) const {
  MemoryTracker& tracker = impl_->state->backend().tracker();
  nlohmann::json mem;
  for (size_t i = 0; i < kMemTagCount; ++i) {
    MemUsage u = tracker.usage(static_cast<MemTag>(i));
    if (u.peak == 0) continue;
    mem[mem_tag_name(static_cast<MemTag>(i))] = {{"current", u.current}, {"peak", u.peak}};
  }
  MemUsage total = tracker.total();
  mem["total"] = {{"current", total.current}, {"peak", total.peak}};
  int64_t rss = 0, hwm = 0;
  if (process_rss_bytes(&rss, &hwm)) mem["process"] = {{"rss", rss}, {"hwm", hwm}};
  (*record)["mem"] = mem;
}

void RunLedger::finish(const std::string&) const {}

}  // namespace ledgerlm
