// Micro-benchmark (not a test): how close a bare AVX2 register tile comes to the FMA peak of this
// core, i.e. the ceiling an fp32 GEMM library could reach here. Side by side, per thread count:
//   peak   ledgerlm's own peak measurement (model/backend/peak_flops.h, what `ledgerlm bench` calls
//   MFU's
//          denominator): register-resident FMA chains, no loads; AVX2 FMA unless the CPU runs the
//          avx512 path (LEDGERLM_CPU_ISA=avx2 then compares like with like)
//   tile   the 6x16 register tile of a packed GEMM (12 accumulators, two B loads and six A
//          broadcasts per k), over A (6 x k) and B (k x 16) panels already packed, m x n x k,
//          its C tile read and written once per k-loop
// (The loops over the registers are unrolled so that the accumulators stay in registers.)
// Prints GFLOP/s of each and the tile's share of the peak. When the libraries' GEMMs
// (tests/bench/bench_gemm_libs.cpp) come close to `tile`, the core, not the library, is the limit.
// Build (after building ledgerlm in BUILD):
//   g++ -O3 -mavx2 -mfma -fopenmp -I. tests/bench/bench_fma_tile.cpp
//       BUILD/libledgerlm_train.a BUILD/libledgerlm_model.a -o /tmp/bench_fma_tile
// Run:   OMP_NUM_THREADS=1 /tmp/bench_fma_tile; OMP_NUM_THREADS=2 /tmp/bench_fma_tile
#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "model/backend/peak_flops.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// C[6,16] += A_panel (k x 6, packed by k) * B_panel (k x 16, packed by k).
void tile_6x16(int k, const float* a, const float* b, float* c, int ldc) {
  __m256 acc[6][2];
#pragma GCC unroll 6
  for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
  for (int p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 6
    for (int r = 0; r < 6; ++r) {
      const __m256 ar = _mm256_broadcast_ss(a + r);
      acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);
    }
    a += 6;
    b += 16;
  }
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r) {
    float* row = c + static_cast<long>(r) * ldc;
    _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), acc[r][0]));
    _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), acc[r][1]));
  }
}

struct Panels {
  float* a;
  float* b;
  float* c;
};

double tile_gflops(int m, int n, int k, int reps) {
  const int threads = omp_get_max_threads();
  std::vector<Panels> mem(threads);
  for (Panels& p : mem) {
    p.a = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * m * k));
    p.b = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * k * n));
    p.c = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * m * n));
    for (long i = 0; i < static_cast<long>(m) * k; ++i) p.a[i] = 1e-3f * static_cast<float>(i % 7);
    for (long i = 0; i < static_cast<long>(k) * n; ++i) p.b[i] = 1e-3f * static_cast<float>(i % 5);
    for (long i = 0; i < static_cast<long>(m) * n; ++i) p.c[i] = 0.0f;
  }
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel
  {
    const Panels& p = mem[omp_get_thread_num()];
    for (int r = 0; r < reps; ++r)
      for (int j = 0; j < n; j += 16)
        for (int i = 0; i < m; i += 6)
          tile_6x16(k, p.a + static_cast<long>(i) * k, p.b + static_cast<long>(j) * k,
                    p.c + static_cast<long>(i) * n + j, n);
  }
  const double s = seconds_since(t0);
  for (Panels& p : mem) {
    std::free(p.a);
    std::free(p.b);
    std::free(p.c);
  }
  return 2.0 * m * n * k * static_cast<double>(reps) * threads / s / 1e9;
}

}  // namespace

int main() {
  const int threads = omp_get_max_threads();
  const ledgerlm::PeakFlops p = ledgerlm::measure_peak_flops(threads);
  const double peak = p.fp32_gflops;
  std::printf("threads %d: FMA peak %.1f GFLOP/s (%s)\n", threads, peak, p.fp32_isa);
  struct Shape {
    int m, n, k, reps;
    const char* where;
  };
  // Panels sized for L1/L2 (a GEMM's inner blocks) and one the size of a bench_small B block.
  for (const Shape s : {Shape{96, 256, 256, 400, "A 96 KB + B 256 KB"},
                        Shape{72, 1024, 256, 120, "A 72 KB + B 1 MB"},
                        Shape{144, 2048, 384, 20, "A 216 KB + B 3 MB"}}) {
    const double g = tile_gflops(s.m, s.n, s.k, s.reps);
    std::printf("tile 6x16 over %4d x %4d x %3d (%s): %6.1f GFLOP/s, %4.1f%% of peak\n", s.m, s.n,
                s.k, s.where, g, 100.0 * g / peak);
  }
  return 0;
}
