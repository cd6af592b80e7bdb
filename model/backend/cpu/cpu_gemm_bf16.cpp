// Native bf16 GEMM: C[M,N] (+)= bf16(op(A)) bf16(op(B)) with fp32 accumulation, on AVX-512 BF16
// (VDPBF16PS: two bf16 products added into each fp32 lane), chosen at run time by the caller.
//
// Numerics: fp32 operands are rounded to bf16 (nearest even) while packing, bf16 operands are
// used as stored; every product of two bf16 values is exact in fp32 and the sums are fp32 in a
// fixed order per output element (k pairs in ascending order), so the result is deterministic
// and independent of the thread count. This is the usual mixed-precision contract (bf16 inputs,
// fp32 accumulation); the portable fallback in cpu_gemm.cpp rounds the same way and calls sgemm.
//
// Layout: both operands are packed into panels of bf16 pairs (one uint32 holds the values at
// k = 2kk and 2kk+1; an odd K pads a zero). A panel of op(A) covers 8 rows: for each pair kk, 8
// words (one per row); a panel of op(B) covers 32 columns: for each kk, 32 words. The
// micro-kernel keeps an 8 x 32 tile of C in 16 zmm accumulators; per pair it loads the 32 B
// words (two zmm) and broadcasts one A word per row. Operands whose K runs along memory rows
// (A untransposed, B transposed: the layer's weight [N,K]) are packed row by row with a scatter
// of 16 pairs; operands whose K runs down the columns (A transposed: dout^T of the weight
// gradient; B untransposed) combine two memory rows into pairs, 16 columns per instruction.
#include "model/backend/cpu/cpu_gemm_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"

// GCC 12's own AVX-512 headers build some conversions from an "undefined" vector that its
// -Wmaybe-uninitialized then reports at every use: a false positive inside the intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define LLM_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace ledgerlm::cpu {
namespace {

constexpr int64_t kMr = 8;   // rows of C per micro-tile (= one packed A panel)
constexpr int64_t kNr = 32;  // columns of C per micro-tile (= one packed B panel)
// K is processed in blocks of this many pairs so that a micro-tile's B panel block (32 KiB)
// stays in L1 while a thread walks the row panels of A.
constexpr int64_t kKcPairs = 256;

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

__mmask16 lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(count, 0)) - 1);
}

// 16 values of a row as bf16 bits in the low halves of 16 int32 lanes (masked lanes read 0).
LLM_TARGET_BF16 inline __m512i load16_bf16(const void* src, DType dt, int64_t offset, __mmask16 m) {
  if (dt == DType::kBF16) {
    const __m256i h = _mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(src) + offset);
    return _mm512_cvtepu16_epi32(h);
  }
  const __m512 f = _mm512_maskz_loadu_ps(m, static_cast<const float*>(src) + offset);
  return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(f));
}

// 16 consecutive pairs of one row (elements offset .. offset+31, `count` of them valid) as one
// uint32 per pair: lane j = (x[2j], x[2j+1]).
LLM_TARGET_BF16 inline __m512i load_row_pairs(const void* src, DType dt, int64_t offset,
                                              int64_t count) {
  if (dt == DType::kBF16) {
    const __mmask32 m = count >= 32 ? __mmask32(0xFFFFFFFFu)
                                    : __mmask32((uint64_t{1} << std::max<int64_t>(count, 0)) - 1);
    return _mm512_maskz_loadu_epi16(m, static_cast<const uint16_t*>(src) + offset);
  }
  const float* f = static_cast<const float*>(src) + offset;
  const __m512 lo = _mm512_maskz_loadu_ps(lanes(count), f);
  const __m512 hi = _mm512_maskz_loadu_ps(lanes(count - 16), f + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// A panel of `width` (8 or 32) lines of an operand whose K runs along memory rows: line i is
// memory row `line0 + i` (element k at row * ld + k). dst[kk * width + i]; lines past `lines`
// are zero.
LLM_TARGET_BF16 void pack_k_along_rows(const void* src, DType dt, int64_t ld, int64_t line0,
                                       int64_t lines, int64_t k, int64_t pairs, int64_t width,
                                       uint32_t* dst) {
  const __m512i index =
      _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                         _mm512_set1_epi32(static_cast<int>(width)));
  for (int64_t i = 0; i < width; ++i) {
    if (line0 + i >= lines) {
      for (int64_t kk = 0; kk < pairs; ++kk) dst[kk * width + i] = 0;
      continue;
    }
    const int64_t row = (line0 + i) * ld;
    for (int64_t kk = 0; kk < pairs; kk += 16) {
      const __m512i v = load_row_pairs(src, dt, row + 2 * kk, k - 2 * kk);
      _mm512_mask_i32scatter_epi32(dst + kk * width + i, lanes(pairs - kk), index, v, 4);
    }
  }
}

// A panel of `width` lines of an operand whose K runs down the memory columns: line i is memory
// column `line0 + i` (element k at k * ld + column). Two memory rows make one row of pairs.
LLM_TARGET_BF16 void pack_k_down_columns(const void* src, DType dt, int64_t ld, int64_t line0,
                                         int64_t lines, int64_t k, int64_t pairs, int64_t width,
                                         uint32_t* dst) {
  for (int64_t kk = 0; kk < pairs; ++kk) {
    const int64_t k0 = 2 * kk, k1 = 2 * kk + 1;
    for (int64_t i = 0; i < width; i += 16) {
      const __mmask16 m = lanes(std::min<int64_t>(width - i, lines - line0 - i));
      const __m512i lo = load16_bf16(src, dt, k0 * ld + line0 + i, m);
      const __m512i hi =
          k1 < k ? load16_bf16(src, dt, k1 * ld + line0 + i, m) : _mm512_setzero_si512();
      const __m512i pair = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
      _mm512_mask_storeu_epi32(dst + kk * width + i, lanes(width - i), pair);
    }
  }
}

struct TileArgs {
  const uint32_t* a;  // packed A panel at this K block's first pair
  const uint32_t* b;  // packed B panel at this K block's first pair
  int64_t pairs;      // k pairs in this K block
  float* c;           // C at the tile's first row and column
  int64_t ldc;
  int64_t cols;  // valid columns in the tile (1..32)
  bool load_c;   // add to the existing C (accumulate, bias, or a K block after the first)
};

template <int MR>
LLM_TARGET_BF16 void micro_tile(const TileArgs& t) {
  __m512 acc0[MR], acc1[MR];
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const uint32_t* ap = t.a;
  const uint32_t* bp = t.b;
  for (int64_t kk = 0; kk < t.pairs; ++kk, ap += kMr, bp += kNr) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  const __mmask16 m0 = lanes(t.cols), m1 = lanes(t.cols - 16);
  for (int r = 0; r < MR; ++r) {
    float* c = t.c + r * t.ldc;
    __m512 v0 = acc0[r], v1 = acc1[r];
    if (t.load_c) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), v1);
    }
    _mm512_mask_storeu_ps(c, m0, v0);
    _mm512_mask_storeu_ps(c + 16, m1, v1);
  }
}

void run_tile(int64_t rows, const TileArgs& t) {
  switch (rows) {
    case 8:
      return micro_tile<8>(t);
    case 7:
      return micro_tile<7>(t);
    case 6:
      return micro_tile<6>(t);
    case 5:
      return micro_tile<5>(t);
    case 4:
      return micro_tile<4>(t);
    case 3:
      return micro_tile<3>(t);
    case 2:
      return micro_tile<2>(t);
    default:
      return micro_tile<1>(t);
  }
}

}  // namespace

namespace {
std::atomic<bool> bf16_dot_enabled{true};
}  // namespace

bool cpu_has_bf16_dot() {
  return cpu_has_avx512_bf16() && bf16_dot_enabled.load(std::memory_order_relaxed);
}

bool cpu_bf16_dot_used(CpuIsa isa) {
  return isa == CpuIsa::kAvx512 && cpu_has_bf16_dot();
}

void cpu_set_bf16_dot_enabled(bool enabled) {
  bf16_dot_enabled.store(enabled, std::memory_order_relaxed);
}

int64_t cpu_gemm_bf16_packed_a(int64_t m, int64_t k) {
  return ceil_div(m, kMr) * kMr * ((k + 1) / 2);
}
int64_t cpu_gemm_bf16_packed_b(int64_t n, int64_t k) {
  return ceil_div(n, kNr) * kNr * ((k + 1) / 2);
}

void cpu_gemm_bf16(CpuBackend& be, const Bf16GemmArgs& g) {
  const int64_t m = g.m, n = g.n, k = g.k;
  const int64_t pairs = (k + 1) / 2;
  const int64_t a_panels = ceil_div(m, kMr), b_panels = ceil_div(n, kNr);
  uint32_t* pa = static_cast<uint32_t*>(be.workspace(
      WorkSlot::kGemmA, static_cast<size_t>(cpu_gemm_bf16_packed_a(m, k)) * sizeof(uint32_t)));
  uint32_t* pb = static_cast<uint32_t*>(be.workspace(
      WorkSlot::kGemmB, static_cast<size_t>(cpu_gemm_bf16_packed_b(n, k)) * sizeof(uint32_t)));
  // Memory leading dimensions: A is [M,K] (K along rows) or [K,M] when transposed; B is [K,N]
  // (K down the columns) or [N,K] when transposed.
  const int64_t lda = g.trans_a ? m : k, ldb = g.trans_b ? k : n;
  const int threads = be.num_threads();
  const bool parallel = m * n * k > (int64_t{1} << 16);
#pragma omp parallel num_threads(threads) if (parallel)
  {
#pragma omp for schedule(static) nowait
    for (int64_t p = 0; p < b_panels; ++p) {
      uint32_t* dst = pb + p * pairs * kNr;
      if (g.trans_b) {
        pack_k_along_rows(g.b, g.b_dtype, ldb, p * kNr, n, k, pairs, kNr, dst);
      } else {
        pack_k_down_columns(g.b, g.b_dtype, ldb, p * kNr, n, k, pairs, kNr, dst);
      }
    }
#pragma omp for schedule(static)
    for (int64_t p = 0; p < a_panels; ++p) {
      uint32_t* dst = pa + p * pairs * kMr;
      if (g.trans_a) {
        pack_k_down_columns(g.a, g.a_dtype, lda, p * kMr, m, k, pairs, kMr, dst);
      } else {
        pack_k_along_rows(g.a, g.a_dtype, lda, p * kMr, m, k, pairs, kMr, dst);
      }
    }
    // K blocks outermost (each C element sums its K blocks in order: deterministic); within a
    // block, a thread's tiles walk the row panels of one B panel, reusing it from cache.
    for (int64_t k0 = 0; k0 < pairs; k0 += kKcPairs) {
      const int64_t kp = std::min(kKcPairs, pairs - k0);
#pragma omp for schedule(static)
      for (int64_t tile = 0; tile < b_panels * a_panels; ++tile) {
        const int64_t p = tile / a_panels, mt = tile % a_panels;
        TileArgs t;
        t.a = pa + mt * pairs * kMr + k0 * kMr;
        t.b = pb + p * pairs * kNr + k0 * kNr;
        t.pairs = kp;
        t.c = g.c + mt * kMr * n + p * kNr;
        t.ldc = n;
        t.cols = std::min(kNr, n - p * kNr);
        t.load_c = g.load_c || k0 > 0;
        run_tile(std::min(kMr, m - mt * kMr), t);
      }
    }
  }
}

}  // namespace ledgerlm::cpu
