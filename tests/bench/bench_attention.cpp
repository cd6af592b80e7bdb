// Micro-benchmark (not a test): CpuBackend attention forward + backward in fp32 on the bench_tiny
// and bench_small shapes, on every path this CPU supports (avx512, avx2, portable), interleaved
// so that load from other processes hits all alike. Prints the median ms per call and the
// GFLOP/s of the block products (causal: the query blocks see keys up to their own end).
// Build (after building ledgerlm_model in BUILD):
//   g++ -O2 -std=c++20 -fopenmp -I. tests/bench/bench_attention.cpp BUILD/libledgerlm_model.a \
//       /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -ldnnl -o /tmp/bench_attention
// Run: OMP_NUM_THREADS=2 OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=1000 /tmp/bench_attention [reps]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_backend.h"

using namespace ledgerlm;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 11;
  struct Shape {
    const char* name;
    int64_t b, t, c, h;
  };
  const Shape shapes[] = {{"bench_tiny  B12 T64 C128 H4", 12, 64, 128, 4},
                          {"bench_small B8 T256 C384 H6", 8, 256, 384, 6}};
  std::vector<cpu::CpuIsa> paths;
  for (cpu::CpuIsa isa : {cpu::CpuIsa::kAvx512, cpu::CpuIsa::kAvx2, cpu::CpuIsa::kPortable})
    if (cpu::cpu_isa_supported(isa)) paths.push_back(isa);
  std::vector<std::unique_ptr<Backend>> backends;
  for (cpu::CpuIsa isa : paths) backends.push_back(cpu::backend_create_cpu_isa(2, isa));
  for (const Shape& s : shapes) {
    AttentionArgs a;
    a.batch = s.b, a.seq = s.t, a.channels = s.c, a.heads = s.h;
    const int64_t n = s.b * s.t;
    std::vector<float> qkv(n * 3 * s.c), out(n * s.c), lse(s.b * s.h * s.t), dout(n * s.c),
        dqkv(n * 3 * s.c);
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 0.01f * static_cast<float>(i % 101) - 0.5f;
    for (size_t i = 0; i < dout.size(); ++i) dout[i] = 0.02f * static_cast<float>(i % 37) - 0.3f;
    // Products per (b, h): forward QK^T and PV, backward 5 (QK^T, dO V^T, P^T dO, dS K, dS^T Q),
    // each 2 * hd * (keys seen) per query row; blocks of 32 queries see keys up to their end.
    double pairs = 0;
    for (int64_t i0 = 0; i0 < s.t; i0 += 32) pairs += 32.0 * static_cast<double>(i0 + 32);
    const double per_product = 2.0 * static_cast<double>(s.c / s.h) * pairs * s.b * s.h;
    std::printf("== %s (block-product GFLOP/s: forward 2, backward 5 products)\n", s.name);
    std::vector<std::vector<double>> fwd(paths.size()), bwd(paths.size());
    for (int rep = 0; rep < reps + 1; ++rep) {
      for (size_t p = 0; p < paths.size(); ++p) {
        Backend& be = *backends[p];
        auto t0 = std::chrono::steady_clock::now();
        be.attention_forward(Tensor(out.data(), DType::kF32), Tensor(lse.data(), DType::kF32),
                             Tensor(qkv.data(), DType::kF32), a);
        auto t1 = std::chrono::steady_clock::now();
        be.attention_backward(Tensor(dqkv.data(), DType::kF32), Tensor(dout.data(), DType::kF32),
                              Tensor(qkv.data(), DType::kF32), Tensor(out.data(), DType::kF32),
                              Tensor(lse.data(), DType::kF32), a);
        auto t2 = std::chrono::steady_clock::now();
        if (rep == 0) continue;
        fwd[p].push_back(std::chrono::duration<double>(t1 - t0).count());
        bwd[p].push_back(std::chrono::duration<double>(t2 - t1).count());
      }
    }
    for (size_t p = 0; p < paths.size(); ++p) {
      const double f = median(fwd[p]), b = median(bwd[p]);
      std::printf("  %-9s forward %8.3f ms (%6.1f GFLOP/s) | backward %8.3f ms (%6.1f GFLOP/s)\n",
                  cpu::cpu_isa_name(paths[p]), 1e3 * f, 2 * per_product / f / 1e9, 1e3 * b,
                  5 * per_product / b / 1e9);
    }
  }
  return 0;
}
