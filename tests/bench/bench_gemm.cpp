// Micro-benchmark (not a test): CpuBackend::gemm on the bench_small linear-layer shapes, fp32
// (OpenBLAS sgemm) vs precision.matmul = bf16 (GemmArgs::bf16_inputs: the native AVX512_BF16
// kernel, operands packed from fp32 activations and bf16 weights), interleaved so that load from
// other processes hits both alike. Prints the median GFLOP/s of each, packing included.
// Build (after building ledgerlm_model in BUILD):
//   g++ -O2 -std=c++20 -fopenmp -I. tests/bench/bench_gemm.cpp BUILD/libledgerlm_model.a \
//       /usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -o /tmp/bench_gemm
// Run with OPENBLAS_CORETYPE set as ledgerlm sets it (see train/main.cpp) and OMP_NUM_THREADS=2.
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
    bool ta, tb;
    bool b_is_weight;  // B is a bf16 weight in the bf16 run (else an fp32 activation)
  };
  const Shape shapes[] = {{"fc fwd    2048x1536x384 NT", 2048, 1536, 384, false, true, true},
                          {"proj fwd  2048x384x1536 NT", 2048, 384, 1536, false, true, true},
                          {"fc dinp   2048x384x1536 NN", 2048, 384, 1536, false, false, true},
                          {"fc dW     1536x384x2048 TN", 1536, 384, 2048, true, false, false},
                          {"proj dW   384x1536x2048 TN", 384, 1536, 2048, true, false, false}};
  for (const Shape& s : shapes) {
    std::vector<float> a(s.m * s.k, 0.01f), b(s.n * s.k, 0.02f), c(s.m * s.n);
    std::vector<uint16_t> bb(b.size(), f32_to_bf16(0.02f));
    std::vector<double> t32, t16;
    for (int rep = 0; rep < 15; ++rep) {
      for (int which = 0; which < 2; ++which) {
        GemmArgs g;
        g.a = Tensor(a.data(), DType::kF32);
        g.b = which == 1 && s.b_is_weight ? Tensor(bb.data(), DType::kBF16)
                                          : Tensor(b.data(), DType::kF32);
        g.c = Tensor(c.data(), DType::kF32);
        g.m = s.m, g.n = s.n, g.k = s.k, g.trans_a = s.ta, g.trans_b = s.tb;
        g.bf16_inputs = which == 1;
        auto t0 = std::chrono::steady_clock::now();
        be->gemm(g);
        double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        (which == 0 ? t32 : t16).push_back(2.0 * s.m * s.n * s.k / dt / 1e9);
      }
    }
    std::sort(t32.begin(), t32.end());
    std::sort(t16.begin(), t16.end());
    std::printf("%s: fp32 sgemm %.1f GFLOP/s (best %.1f) | matmul bf16 %.1f GFLOP/s (best %.1f)\n",
                s.name, t32[t32.size() / 2], t32.back(), t16[t16.size() / 2], t16.back());
  }
}
