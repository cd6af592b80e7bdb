// ProfilingBackend's timing discipline, on the CPU: every timed op is bracketed by
// Backend::synchronize() of the backend it wraps (before the first clock read and after the op,
// before the second), so a device backend's asynchronous work is charged to the op that queued
// it; set_timing(false) forwards without synchronizing or recording; and the figures on the CPU
// are what they were (results bitwise those of the bare backend, one call per op, GEMM flops
// 2 m n k per call and by shape). A recording backend between the profiler and the CPU backend
// sees the order of calls.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/optim/optim_op.h"
#include "model/backend/wrap/profiling_backend.h"

namespace ledgerlm {
namespace {

// Forwards to the CPU backend and logs "sync", "begin NAME" and "end NAME" in call order.
class RecordingBackend final : public ForwardingBackend {
 public:
  explicit RecordingBackend(std::vector<std::string>* log)
      : ForwardingBackend(backend_create_cpu(1)), log_(log) {}
  void synchronize() override {
    log_->push_back("sync");
    ForwardingBackend::synchronize();
  }

 protected:
  void op_begin(const char* op) override { log_->push_back(std::string("begin ") + op); }
  void op_end(const char* op) override { log_->push_back(std::string("end ") + op); }

 private:
  std::vector<std::string>* log_;
};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s;
}

struct Operands {
  Buffer a, b, c, x;
};

// C[2,3] = A[2,4] B[3,4]^T on fixed values, and x[6] for the elementwise ops.
GemmArgs make_gemm(Backend& be, Operands* o) {
  const std::vector<float> a = {1, 2, 3, 4, -1, 0.5f, 2, 1},
                           b = {1, 0, 2, 1, 3, 1, 0, -2, 0.25f, 4, 1, 1};
  o->a = be.allocate(MemTag::kWorkspace, a.size() * sizeof(float));
  o->b = be.allocate(MemTag::kWorkspace, b.size() * sizeof(float));
  o->c = be.allocate(MemTag::kWorkspace, 6 * sizeof(float));
  o->x = be.allocate(MemTag::kWorkspace, 6 * sizeof(float));
  be.copy_from_host(Tensor(o->a.data(), DType::kF32), a.data(), static_cast<int64_t>(a.size()));
  be.copy_from_host(Tensor(o->b.data(), DType::kF32), b.data(), static_cast<int64_t>(b.size()));
  GemmArgs g;
  g.a = Tensor(o->a.data(), DType::kF32);
  g.b = Tensor(o->b.data(), DType::kF32);
  g.c = Tensor(o->c.data(), DType::kF32);
  g.m = 2;
  g.n = 3;
  g.k = 4;
  g.trans_b = true;
  return g;
}

// gemm, then x = C + C, then sum(x): the results come back to the host.
std::vector<float> run_ops(Backend& be, Operands* o, double* total) {
  const GemmArgs g = make_gemm(be, o);
  be.gemm(g);
  be.add(Tensor(o->x.data(), DType::kF32), g.c, g.c, 6);
  *total = be.sum(Tensor(o->x.data(), DType::kF32), 6);
  std::vector<float> out(6);
  be.copy_to_host(out.data(), Tensor(o->x.data(), DType::kF32), 6);
  return out;
}

TEST(ProfilingBackend, SynchronizesAroundEveryTimedOp) {
  std::vector<std::string> log;
  ProfilingBackend prof(std::make_unique<RecordingBackend>(&log));
  Operands o;
  double total = 0;
  run_ops(prof, &o, &total);
  // optimizer_ops: the profiler times it under "optimizer" itself (not through op_begin/op_end).
  std::vector<float> w = {1, 2, 3, 4}, grad = {0.5f, 0.5f, 0.5f, 0.5f};
  Buffer wb = prof.allocate(MemTag::kWorkspace, 16), gb = prof.allocate(MemTag::kWorkspace, 16);
  prof.copy_from_host(Tensor(wb.data(), DType::kF32), w.data(), 4);
  prof.copy_from_host(Tensor(gb.data(), DType::kF32), grad.data(), 4);
  OptimOp op;
  op.kind = OptimOpKind::kSgdFused;
  op.w = Tensor(wb.data(), DType::kF32);
  op.g = Tensor(gb.data(), DType::kF32);
  op.n = 4;
  op.sgd.lr = 0.1f;
  log.clear();
  prof.optimizer_ops(&op, 1);
  EXPECT_EQ(joined(log), "sync, begin optimizer_ops, end optimizer_ops, sync")
      << "optimizer_ops must be bracketed by synchronize";

  log.clear();
  o = Operands{};
  run_ops(prof, &o, &total);
  // The four copies to the device of make_gemm and the ops of run_ops: each op's begin is right
  // after a sync and its end right before one; no op starts or ends without.
  std::vector<std::string> ops_seen;
  for (size_t i = 0; i < log.size(); ++i) {
    if (log[i].starts_with("begin ")) {
      ops_seen.push_back(log[i].substr(6));
      ASSERT_GT(i, 0u) << joined(log);
      EXPECT_EQ(log[i - 1], "sync") << log[i] << " not preceded by a sync: " << joined(log);
    }
    if (log[i].starts_with("end ")) {
      ASSERT_LT(i + 1, log.size()) << joined(log);
      EXPECT_EQ(log[i + 1], "sync") << log[i] << " not followed by a sync: " << joined(log);
    }
  }
  EXPECT_EQ(joined(ops_seen), "copy_from_host, copy_from_host, gemm, add, sum, copy_to_host");
  std::printf("profiled op sequence: %s\n", joined(log).c_str());

  // Timing off: a pass-through, nothing synchronized, nothing recorded.
  prof.reset_times();
  prof.set_timing(false);
  log.clear();
  o = Operands{};
  run_ops(prof, &o, &total);
  prof.optimizer_ops(&op, 1);
  for (const auto& e : log) EXPECT_NE(e, "sync") << "timing off must not synchronize";
  EXPECT_TRUE(prof.times().empty());
  EXPECT_TRUE(prof.gemm_times().empty());
}

TEST(ProfilingBackend, CpuFiguresUnchanged) {
  auto bare = backend_create_cpu(1);
  Operands ob;
  double bare_total = 0;
  const std::vector<float> want = run_ops(*bare, &ob, &bare_total);

  ProfilingBackend prof(backend_create_cpu(1));
  Operands op;
  double total = 0;
  const std::vector<float> got = run_ops(prof, &op, &total);
  // Same ops in the same order on the same values: bitwise equal.
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "element " << i;
  EXPECT_EQ(total, bare_total);

  const auto& t = prof.times();
  for (const char* name : {"copy_from_host", "gemm", "add", "sum", "copy_to_host"}) {
    ASSERT_TRUE(t.count(name)) << name << " not timed";
    EXPECT_GE(t.at(name).seconds, 0.0) << name;
    EXPECT_TRUE(std::isfinite(t.at(name).seconds)) << name;
  }
  EXPECT_EQ(t.at("copy_from_host").calls, 2);
  EXPECT_EQ(t.at("gemm").calls, 1);
  EXPECT_EQ(t.at("add").calls, 1);
  EXPECT_EQ(t.at("sum").calls, 1);
  ASSERT_EQ(prof.gemm_times().size(), 1u);
  const auto& [key, shape] = *prof.gemm_times().begin();
  EXPECT_EQ(key, "NT 2x3x4");
  EXPECT_EQ(shape.calls, 1);
  EXPECT_EQ(shape.flops, 2.0 * 2 * 3 * 4);
  // The per-shape time is the same interval as the op total's (one GEMM).
  EXPECT_EQ(shape.seconds, t.at("gemm").seconds);
}

}  // namespace
}  // namespace ledgerlm
