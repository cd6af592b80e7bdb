// Micro-benchmark (not a test): CpuBackend::gemm with fp32 weights (OpenBLAS sgemm) vs bf16
// weights (the native AVX512_BF16 GEMM) on the bench_small linear-layer shapes, interleaved so
// that load from other processes hits both alike. Prints the median GFLOP/s of each.
// Build (after building ledgerlm_model in BUILD):
//   g++ -O2 -std=c++20 -fopenmp -I. tests/bench/bench_gemm.cpp BUILD/libledgerlm_model.a \
//       /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -o /tmp/bench_gemm
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/dtype.h"

using namespace ledgerlm;

int main() {
  auto be = backend_create_cpu(2);
  struct Shape {
    const char* name;
    int64_t m, n, k;
    bool tb;
  };
  const Shape shapes[] = {{"qkv fwd  2048x1152x384 NT", 2048, 1152, 384, true},
                          {"fc fwd   2048x1536x384 NT", 2048, 1536, 384, true},
                          {"proj fwd 2048x384x1536 NT", 2048, 384, 1536, true},
                          {"fc dinp  2048x384x1536 NN", 2048, 384, 1536, false},
                          {"qkv dinp 2048x384x1152 NN", 2048, 384, 1152, false}};
  for (const Shape& s : shapes) {
    std::vector<float> a(s.m * s.k, 0.01f), w(s.n * s.k, 0.02f), c(s.m * s.n);
    std::vector<uint16_t> wb(w.size(), f32_to_bf16(0.02f));
    std::vector<double> t32, t16;
    for (int rep = 0; rep < 15; ++rep) {
      for (int which = 0; which < 2; ++which) {
        GemmArgs g;
        g.a = Tensor(a.data(), DType::kF32);
        g.b = which == 0 ? Tensor(w.data(), DType::kF32) : Tensor(wb.data(), DType::kBF16);
        g.c = Tensor(c.data(), DType::kF32);
        g.m = s.m, g.n = s.n, g.k = s.k, g.trans_b = s.tb;
        auto t0 = std::chrono::steady_clock::now();
        be->gemm(g);
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        (which == 0 ? t32 : t16).push_back(2.0 * s.m * s.n * s.k / dt / 1e9);
      }
    }
    std::sort(t32.begin(), t32.end());
    std::sort(t16.begin(), t16.end());
    std::printf("%s: fp32 sgemm %.1f GFLOP/s (best %.1f) | bf16 native %.1f GFLOP/s (best %.1f)\n",
                s.name, t32[t32.size() / 2], t32.back(), t16[t16.size() / 2], t16.back());
  }
}
