// Micro-benchmark (not a test): issue rate of 512-bit FMA vs VDPBF16PS on one core, timed in
// thread CPU time so that other load on the machine does not distort it.
// Build: g++ -O2 -o /tmp/bench_dot_rate tests/bench/bench_dot_rate.cpp
#include <immintrin.h>
#include <time.h>

#include <cstdio>

namespace {

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

__attribute__((target("avx512f"), noinline)) float fma_loop(long iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(0.001f * i);
  const __m512 b = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it) {
    // Fully unrolled so the 12 accumulators stay in registers (a rolled loop keeps them in
    // memory and measures store-to-load forwarding instead of the FMA units).
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx512f,avx512bf16"), noinline)) float dot_loop(long iters) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3a80);
  for (long it = 0; it < iters; ++it) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], x, y);
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_reduce_add_ps(s);
}

}  // namespace

int main() {
  const long iters = 20000000;
  for (int rep = 0; rep < 3; ++rep) {
    double t0 = cpu_seconds();
    float s1 = fma_loop(iters);
    double t1 = cpu_seconds();
    float s2 = dot_loop(iters);
    double t2 = cpu_seconds();
    std::printf(
        "fp32 FMA zmm: %.1f GFLOP/s (%.2f instr/ns) | VDPBF16PS zmm: %.1f GFLOP/s (%.2f instr/ns)  "
        "[%g %g]\n",
        iters * 12 * 32 / (t1 - t0) / 1e9, iters * 12 / (t1 - t0) / 1e9,
        iters * 12 * 64 / (t2 - t1) / 1e9, iters * 12 / (t2 - t1) / 1e9, s1, s2);
  }
}
