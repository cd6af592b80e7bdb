// precision.subnormals on the CPU backend (model/base/subnormals.h, cpu_subnormals.h): the mode
// reaches every thread that computes — the caller, every OpenMP thread (those already running
// too), the GEMM libraries that run on that pool (oneDNN for fp32, OpenBLAS for fp64) — and a
// thread we start adopts it. Subnormal inputs must give exact zeros when flushing (DAZ reads
// them as 0, FTZ flushes subnormal results) and the IEEE values when keeping; any thread left
// behind would leave a nonzero block, so every check is exact.
#include <gtest/gtest.h>

#include <omp.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/common/op_constants.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_gemm_lib.h"
#include "model/backend/cpu/cpu_subnormals.h"
#include "model/base/subnormals.h"

namespace ledgerlm {
namespace {

// More threads than the test machine's cores: the pool holds threads the default team (2,
// OMP_NUM_THREADS) never starts.
constexpr int kThreads = 4;

// The process default back after each case, so the other tests run as they always do.
class OpsSubnormals : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!subnormals_supported()) GTEST_SKIP() << "no flush-to-zero control on this CPU";
  }
  void TearDown() override {
    subnormals_set_process(true);
    cpu::cpu_subnormals_apply(kThreads);
  }
};

// Each thread of a kThreads team multiplies a subnormal by 3: 0 where it flushes.
std::vector<float> per_thread_products() {
  std::vector<float> out(kThreads, -1.0f);
  const volatile float tiny = std::numeric_limits<float>::denorm_min() * 1000.0f;
#pragma omp parallel num_threads(kThreads)
  {
    const volatile float three = 3.0f;
    const float a = tiny, b = three;  // loaded at run time: a real multiplication
    out[static_cast<size_t>(omp_get_thread_num())] = a * b;
  }
  return out;
}

// C[n,n] = A B with every A element subnormal and B = 1, on `be` in fp32 or fp64 (k = n: the
// sums are normal numbers when subnormals are kept).
template <class T>
std::vector<T> gemm_of_subnormals(Backend& be, DType dt, int64_t n) {
  const T tiny = std::numeric_limits<T>::denorm_min() * T(1000);
  std::vector<T> a(static_cast<size_t>(n * n), tiny), b(static_cast<size_t>(n * n), T(1)),
      c(static_cast<size_t>(n * n), T(-1));
  Buffer ba = be.allocate(MemTag::kWorkspace, a.size() * sizeof(T));
  Buffer bb = be.allocate(MemTag::kWorkspace, b.size() * sizeof(T));
  Buffer bc = be.allocate(MemTag::kWorkspace, c.size() * sizeof(T));
  be.copy_from_host(Tensor(ba.data(), dt), a.data(), n * n);
  be.copy_from_host(Tensor(bb.data(), dt), b.data(), n * n);
  GemmArgs g;
  g.a = Tensor(ba.data(), dt);
  g.b = Tensor(bb.data(), dt);
  g.c = Tensor(bc.data(), dt);
  g.m = g.n = g.k = n;
  be.gemm(g);
  be.copy_to_host(c.data(), g.c, n * n);
  return c;
}

// scale(x, 1) over chunks spread across every thread of the backend.
std::vector<float> scaled_subnormals(Backend& be) {
  const int64_t n = kBufferChunk * 2 * kThreads;
  std::vector<float> x(static_cast<size_t>(n), std::numeric_limits<float>::denorm_min() * 7.0f);
  Buffer bx = be.allocate(MemTag::kWorkspace, x.size() * sizeof(float));
  be.copy_from_host(Tensor(bx.data(), DType::kF32), x.data(), n);
  be.scale(Tensor(bx.data(), DType::kF32), n, 1.0);
  be.copy_to_host(x.data(), Tensor(bx.data(), DType::kF32), n);
  return x;
}

// By bit pattern: a float comparison on a thread with DAZ on reads a subnormal as 0, and this
// (the test's main) thread flushes in half the checks.
template <class T>
bool nonzero_bits(T x) {
  return std::bit_cast<std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>(x) != 0;
}

template <class T>
int64_t count_nonzero(const std::vector<T>& v) {
  int64_t c = 0;
  for (T x : v) c += nonzero_bits(x);
  return c;
}

TEST_F(OpsSubnormals, FlushReachesEveryComputeThreadAndTheGemmLibraries) {
  // Start the pool keeping subnormals, then flush: the backend must reach the threads that
  // already run (they do not inherit a mode set later on the main thread).
  subnormals_set_process(false);
  auto keep = backend_create_cpu(kThreads);
  EXPECT_EQ(cpu::cpu_subnormals_state(kThreads), "keep");
  subnormals_set_process(true);
  EXPECT_EQ(cpu::cpu_subnormals_state(kThreads), "mixed (1 of 4 threads flush)")
      << "the pool's running threads kept their mode: what the backend must fix";
  auto be = backend_create_cpu(kThreads);
  EXPECT_EQ(cpu::cpu_subnormals_state(kThreads), "flush");
  EXPECT_EQ(count_nonzero(per_thread_products()), 0);
  EXPECT_EQ(count_nonzero(scaled_subnormals(*be)), 0);
  // fp32 GEMMs of this shape run on oneDNN when the build has it, fp64 ones on OpenBLAS.
  const int64_t n = 256;
  SCOPED_TRACE(std::string("fp32 GEMM on ") + cpu::gemm_lib_name(cpu::cpu_gemm_lib_choose(
                                                  cpu::cpu_isa_default(), n, n, n, false, false)));
  EXPECT_EQ(count_nonzero(gemm_of_subnormals<float>(*be, DType::kF32, n)), 0);
  EXPECT_EQ(count_nonzero(gemm_of_subnormals<double>(*be, DType::kF64, n)), 0);
  // A thread this process starts adopts the mode.
  bool thread_flushes = false;
  std::thread t([&] {
    subnormals_set_thread(false);  // whatever it started with
    subnormals_adopt();
    thread_flushes = subnormals_thread_flushes();
  });
  t.join();
  EXPECT_TRUE(thread_flushes);
}

TEST_F(OpsSubnormals, KeepGivesTheIeeeValuesOnEveryThread) {
  subnormals_set_process(true);
  auto flush = backend_create_cpu(kThreads);
  subnormals_set_process(false);
  auto be = backend_create_cpu(kThreads);
  EXPECT_EQ(cpu::cpu_subnormals_state(kThreads), "keep");
  for (float p : per_thread_products())
    EXPECT_EQ(p, std::numeric_limits<float>::denorm_min() * 3000.0f);
  const std::vector<float> x = scaled_subnormals(*be);
  EXPECT_EQ(count_nonzero(x), static_cast<int64_t>(x.size()));
  const int64_t n = 256;
  const std::vector<float> c32 = gemm_of_subnormals<float>(*be, DType::kF32, n);
  const std::vector<double> c64 = gemm_of_subnormals<double>(*be, DType::kF64, n);
  EXPECT_EQ(count_nonzero(c32), n * n);
  EXPECT_EQ(count_nonzero(c64), n * n);
  // n products of 1000 denorm_min each: exact in both precisions (integers times denorm_min).
  EXPECT_EQ(c32[0], std::numeric_limits<float>::denorm_min() * 1000.0f * static_cast<float>(n));
  EXPECT_EQ(c64[0], std::numeric_limits<double>::denorm_min() * 1000.0 * static_cast<double>(n));
}

}  // namespace
}  // namespace ledgerlm
