// FMA / bf16-dot micro-benchmarks (see peak_flops.h). Each thread runs independent
// accumulator chains long enough to hide the FMA latency; the result is kept live so the
// compiler cannot drop the loop.
#include "model/backend/peak_flops.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>

#include "model/backend/cpu/cpu_isa.h"

namespace ledgerlm {
namespace {

constexpr int64_t kIters = 1 << 20;
// Independent accumulator chains per thread: enough to cover the FMA latency times its issue rate.
constexpr int kChains = 12;

// Sums the accumulators' lanes into a volatile, so the compiler must run every chain.
void keep_live(const float* lanes, int n) {
  float sink = 0;
  for (int i = 0; i < n; ++i) sink += lanes[i];
  volatile float keep = sink;
  (void)keep;
}

__attribute__((target("avx512f"))) double fma_avx512(int64_t iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  alignas(64) float out[kChains * 16];
  for (int i = 0; i < kChains; ++i) _mm512_store_ps(out + 16 * i, a[i]);
  keep_live(out, kChains * 16);
  return static_cast<double>(iters) * kChains * 16 * 2;
}

__attribute__((target("avx2,fma"))) double fma_avx2(int64_t iters) {
  __m256 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 b = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm256_fmadd_ps(a[i], b, c);
  alignas(32) float out[kChains * 8];
  for (int i = 0; i < kChains; ++i) _mm256_store_ps(out + 8 * i, a[i]);
  keep_live(out, kChains * 8);
  return static_cast<double>(iters) * kChains * 8 * 2;
}

__attribute__((target("avx512f,avx512bf16"))) double dot_bf16(int64_t iters) {
  __m512 a[kChains];
  for (int i = 0; i < kChains; ++i) a[i] = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3a80);
  for (int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  alignas(64) float out[kChains * 16];
  for (int i = 0; i < kChains; ++i) _mm512_store_ps(out + 16 * i, a[i]);
  keep_live(out, kChains * 16);
  return static_cast<double>(iters) * kChains * 32 * 2;  // 32 bf16 products + adds per lane set
}

template <class Kernel>
double run_parallel(Kernel kernel, int threads, double seconds) {
  double best = 0.0;
  auto t_end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < t_end || best == 0.0) {
    double flops = 0.0;
    auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : flops)
    flops += kernel(kIters / 8);
    double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (flops / dt > best) best = flops / dt;
  }
  return best / 1e9;
}

}  // namespace

PeakFlops measure_peak_flops(int threads, double seconds) {
  PeakFlops p;
  __builtin_cpu_init();
  // The instructions of the path the kernels run on (LEDGERLM_CPU_ISA=avx2 on an AVX-512 CPU
  // measures the AVX2 FMA rate: the peak that path can reach).
  const cpu::CpuIsa path = cpu::cpu_isa_default();
  if (path == cpu::CpuIsa::kAvx512) {
    p.fp32_gflops = run_parallel(fma_avx512, threads, seconds);
    p.fp32_isa = "avx512 fma";
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    p.fp32_gflops = run_parallel(fma_avx2, threads, seconds);
    p.fp32_isa = "avx2 fma";
  }
  if (path == cpu::CpuIsa::kAvx512 && cpu::cpu_has_avx512_bf16())
    p.bf16_gflops = run_parallel(dot_bf16, threads, seconds);
  return p;
}

}  // namespace ledgerlm
