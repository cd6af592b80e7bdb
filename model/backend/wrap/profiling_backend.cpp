// Per-op timing wrapper (see profiling_backend.h).
#include "model/backend/wrap/profiling_backend.h"

#include <exception>
#include <utility>

namespace ledgerlm {
namespace {

double seconds_between(std::chrono::steady_clock::time_point t0,
                       std::chrono::steady_clock::time_point t1) {
  return std::chrono::duration<double>(t1 - t0).count();
}

}  // namespace

std::chrono::steady_clock::time_point ProfilingBackend::synced_now() {
  inner().synchronize();
  return std::chrono::steady_clock::now();
}

void ProfilingBackend::op_begin(const char*) {
  if (timing_) op_start_ = synced_now();
}
void ProfilingBackend::op_end(const char* op) {
  // An op that threw is not timed, and its error is the one to report: no synchronize then.
  if (!timing_ || std::uncaught_exceptions() > 0) return;
  OpTime& slot = times_[op];
  slot.seconds += seconds_between(op_start_, synced_now());
  ++slot.calls;
}

void ProfilingBackend::gemm(const GemmArgs& args) {
  if (!timing_) return inner().gemm(args);
  std::string key = std::string(args.trans_a ? "T" : "N") + (args.trans_b ? "T " : "N ") +
                    std::to_string(args.m) + "x" + std::to_string(args.n) + "x" +
                    std::to_string(args.k) + (args.bias.empty() ? "" : " +bias") +
                    (args.accumulate ? " +=C" : "");
  const auto t0 = synced_now();
  inner().gemm(args);
  const double seconds = seconds_between(t0, synced_now());
  OpTime& all = times_["gemm"];
  all.seconds += seconds;
  ++all.calls;
  OpTime& shape = gemm_times_[key];
  shape.seconds += seconds;
  shape.calls += 1;
  shape.shape = args;
  shape.flops +=
      2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
}
void ProfilingBackend::optimizer_op(const OptimOp& op, double* sums) {
  if (!timing_) return inner().optimizer_op(op, sums);
  const auto t0 = synced_now();
  inner().optimizer_op(op, sums);
  OpTime& slot = times_["optimizer"];
  slot.seconds += seconds_between(t0, synced_now());
  ++slot.calls;
}
void ProfilingBackend::optimizer_ops(const OptimOp* ops, int64_t count) {
  if (!timing_) return inner().optimizer_ops(ops, count);
  const auto t0 = synced_now();
  inner().optimizer_ops(ops, count);
  OpTime& slot = times_["optimizer"];
  slot.seconds += seconds_between(t0, synced_now());
  ++slot.calls;
}

}  // namespace ledgerlm
