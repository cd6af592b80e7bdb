// Per-op timing wrapper (see profiling_backend.h).
#include "model/backend/wrap/profiling_backend.h"

#include <utility>

namespace ledgerlm {
namespace {

class Timer {
 public:
  Timer(std::map<std::string, OpTime>& times, const char* name)
      : slot_(times[name]), t0_(std::chrono::steady_clock::now()) {}
  ~Timer() {
    slot_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ++slot_.calls;
  }

 private:
  OpTime& slot_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

void ProfilingBackend::op_begin(const char*) {
  op_start_ = std::chrono::steady_clock::now();
}
void ProfilingBackend::op_end(const char* op) {
  OpTime& slot = times_[op];
  slot.seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - op_start_).count();
  ++slot.calls;
}

void ProfilingBackend::gemm(const GemmArgs& args) {
  std::string key = std::string(args.trans_a ? "T" : "N") + (args.trans_b ? "T " : "N ") +
                    std::to_string(args.m) + "x" + std::to_string(args.n) + "x" +
                    std::to_string(args.k) + (args.bias.empty() ? "" : " +bias") +
                    (args.accumulate ? " +=C" : "");
  OpTime& shape = gemm_times_[key];
  const auto t0 = std::chrono::steady_clock::now();
  {
    Timer tm(times_, "gemm");
    inner().gemm(args);
  }
  shape.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  shape.calls += 1;
  shape.shape = args;
  shape.flops +=
      2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
}
void ProfilingBackend::optimizer_op(const OptimOp& op, double* sums) {
  Timer tm(times_, "optimizer");
  inner().optimizer_op(op, sums);
}
void ProfilingBackend::optimizer_ops(const OptimOp* ops, int64_t count) {
  Timer tm(times_, "optimizer");
  inner().optimizer_ops(ops, count);
}

}  // namespace ledgerlm
