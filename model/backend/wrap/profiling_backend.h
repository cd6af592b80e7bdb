// A Backend wrapper that times every op (wall clock, per op name) and forwards to the real
// backend: `ledgerlm bench` uses it for the time split by op. Costs two clock reads per op, and
// on a device backend two synchronizations (see below).
// Every op is timed under its Backend method's name (ForwardingBackend's op_begin / op_end),
// except the two below that it keeps apart: gemm, also timed per shape, and the optimizer's
// kernels, optimizer_op and optimizer_ops, timed together as "optimizer".
//
// Device ops run asynchronously: a host clock read right after a call returns measures the
// launch, and the kernel's time lands on whichever later op waits for the device. So each timed
// op is bracketed by Backend::synchronize(): before the first clock read (the queue holds no
// earlier work) and before the second (the op's own work has finished). synchronize() rather
// than CUDA events recorded around each op: it keeps this wrapper free of device code (the same
// wrapper for every backend, and the ordering is testable on the CPU with a counting backend),
// and it charges an op everything it costs, host-side work inside it (operand casts, workspace
// growth, host staging) included, which events on the stream would not see. The price is that
// host and device no longer overlap, so throughput must not be read from profiled steps on a
// device backend: set_timing(false) makes the wrapper a plain pass-through (no synchronization,
// nothing recorded) for those steps. On a host-memory backend synchronize() does nothing, and
// the figures are those of plain clock reads.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "model/backend/wrap/forwarding_backend.h"

namespace ledgerlm {

struct OpTime {
  double seconds = 0.0;
  int64_t calls = 0;
  double flops = 0.0;  // GEMMs only: 2 m n k per call
  GemmArgs shape;      // GEMMs only: the last call's arguments (sizes, flags, dtypes)
};

class ProfilingBackend : public ForwardingBackend {
 public:
  explicit ProfilingBackend(std::unique_ptr<Backend> inner) : ForwardingBackend(std::move(inner)) {}
  const std::map<std::string, OpTime>& times() const { return times_; }
  // GEMM time by shape, keyed like "NT 2048x1152x384 +bias" (op(A) op(B) m x n x k, then
  // +bias / +=C), so the GEMM share can be read as GFLOP/s per layer shape.
  const std::map<std::string, OpTime>& gemm_times() const { return gemm_times_; }
  void reset_times() {
    times_.clear();
    gemm_times_.clear();
  }
  // false: forward without synchronizing or recording (true when constructed).
  void set_timing(bool on) { timing_ = on; }
  bool timing() const { return timing_; }

  void gemm(const GemmArgs& args) override;
  void optimizer_op(const OptimOp& op, double* sums) override;
  void optimizer_ops(const OptimOp* ops, int64_t count) override;

 protected:
  void op_begin(const char* op) override;
  void op_end(const char* op) override;

 private:
  // The clock after the inner backend has finished everything queued so far.
  std::chrono::steady_clock::time_point synced_now();

  std::map<std::string, OpTime> times_;
  std::map<std::string, OpTime> gemm_times_;
  std::chrono::steady_clock::time_point op_start_;  // of the op in progress (ops do not nest)
  bool timing_ = true;
};

}  // namespace ledgerlm
