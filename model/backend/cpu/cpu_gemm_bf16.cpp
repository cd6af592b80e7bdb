// Native bf16 GEMM for bf16 weights: C[M,N] (+)= A[M,K] op(B) (+ bias) with A fp32 activations,
// B bf16 ([N,K] with trans_b, the linear layer's forward; [K,N] without, its input gradient), C
// fp32. Uses AVX-512 BF16 (VDPBF16PS: two bf16 products added into an fp32 lane), chosen at run
// time; callers fall back to widening + sgemm on CPUs without it.
//
// Numerics: A is rounded to bf16 (nearest even) while packing, B already is bf16; every product
// of two bf16 values is exact in fp32 and the sums are fp32, in a fixed order per output element
// (k pairs in ascending order), so the result is deterministic and independent of the thread
// count. This is the usual mixed-precision contract (bf16 inputs, fp32 accumulation).
//
// Layout: A is converted to bf16 rows padded to an even K ("pairs", one uint32 per k pair).
// B is packed into panels of 32 columns: panel p holds, for each k pair kk, 32 uint32 words
// (column p*32+j's values at k = 2kk and 2kk+1), so one 64-byte load feeds 16 lanes x 2 products
// per VDPBF16PS and two loads cover the panel. The micro-kernel keeps an 8 x 32 tile of C in 16
// zmm accumulators and broadcasts one A pair per row and k pair.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_gemm_bf16.h"

#define LLM_TARGET_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

namespace ledgerlm::cpu {
namespace {

constexpr int64_t kMr = 8;   // rows of C per micro-tile
constexpr int64_t kNr = 32;  // columns of C per micro-tile (= one packed B panel)
// K is processed in blocks of this many pairs so the A rows (8 x 1 KiB) and the B panel block
// (32 KiB) of one micro-tile stay in L1/L2 while a thread walks the rows of its panel.
constexpr int64_t kKcPairs = 256;

uint32_t pair_bits(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// dst[r][kk] = bf16 pair (a[r][2kk], a[r][2kk+1]) for rows [r0, r1); odd K pads a zero.
LLM_TARGET_BF16 void pack_a_rows(const float* a, int64_t k, int64_t pairs, int64_t r0, int64_t r1,
                                 uint32_t* dst) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* src = a + r * k;
    uint32_t* out = dst + r * pairs;
    int64_t i = 0;
    for (; i + 32 <= k; i += 32) {
      const __m512 lo = _mm512_loadu_ps(src + i);
      const __m512 hi = _mm512_loadu_ps(src + i + 16);
      _mm512_storeu_si512(out + i / 2, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
    }
    for (; i < k; i += 2) {
      const uint16_t lo = f32_to_bf16(src[i]);
      const uint16_t hi = i + 1 < k ? f32_to_bf16(src[i + 1]) : uint16_t{0};
      out[i / 2] = pair_bits(lo, hi);
    }
  }
}

// Packs panel p of B (columns p*32 .. p*32+31, zero beyond N, zero high half past odd K).
void pack_b_panel(const uint16_t* b, bool trans_b, int64_t n, int64_t k, int64_t pairs, int64_t p,
                  uint32_t* dst) {
  for (int64_t kk = 0; kk < pairs; ++kk) {
    uint32_t* out = dst + kk * kNr;
    const int64_t k0 = 2 * kk, k1 = 2 * kk + 1;
    for (int64_t j = 0; j < kNr; ++j) {
      const int64_t col = p * kNr + j;
      if (col >= n) {
        out[j] = 0;
        continue;
      }
      // trans_b: B stored [N,K], element (k, col) at col*K + k; else [K,N] at k*N + col.
      const uint16_t lo = trans_b ? b[col * k + k0] : b[k0 * n + col];
      const uint16_t hi = k1 < k ? (trans_b ? b[col * k + k1] : b[k1 * n + col]) : uint16_t{0};
      out[j] = pair_bits(lo, hi);
    }
  }
}

struct TileArgs {
  const uint32_t* a;  // packed A at this tile's first row and this K block's first pair
  int64_t a_stride;   // pairs per packed A row
  const uint32_t* b;  // packed B panel at this K block
  int64_t pairs;      // k pairs in this K block
  float* c;           // C at the tile's first row and column
  int64_t ldc;
  int64_t cols;       // valid columns in the tile (1..32)
  const float* bias;  // bias at the tile's first column, or null; added in the last K block
  bool load_c;        // add the existing C (accumulate, or a K block after the first)
};

template <int MR>
LLM_TARGET_BF16 void micro_tile(const TileArgs& t) {
  __m512 acc0[MR], acc1[MR];
  for (int r = 0; r < MR; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const uint32_t* bp = t.b;
  for (int64_t kk = 0; kk < t.pairs; ++kk, bp += kNr) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(bp);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(bp + 16);
    for (int r = 0; r < MR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(t.a[r * t.a_stride + kk]));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  const __mmask16 m0 = t.cols >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << t.cols) - 1);
  const __mmask16 m1 = t.cols >= 32  ? __mmask16(0xFFFF)
                       : t.cols > 16 ? __mmask16((1u << (t.cols - 16)) - 1)
                                     : __mmask16(0);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (t.bias != nullptr) {
    bias0 = _mm512_maskz_loadu_ps(m0, t.bias);
    bias1 = _mm512_maskz_loadu_ps(m1, t.bias + 16);
  }
  for (int r = 0; r < MR; ++r) {
    float* c = t.c + r * t.ldc;
    __m512 v0 = acc0[r], v1 = acc1[r];
    if (t.load_c) {
      v0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, c), v0);
      v1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, c + 16), v1);
    }
    if (t.bias != nullptr) {
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
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

bool cpu_has_bf16_dot() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512bf16");
  return has;
}

void cpu_gemm_bf16(CpuBackend& be, const Bf16GemmArgs& g) {
  const int64_t m = g.m, n = g.n, k = g.k;
  const int64_t pairs = (k + 1) / 2;
  const int64_t panels = (n + kNr - 1) / kNr;
  const int64_t m_tiles = (m + kMr - 1) / kMr;
  uint32_t* pa = static_cast<uint32_t*>(
      be.workspace(WorkSlot::kGemmA, static_cast<size_t>(m * pairs) * sizeof(uint32_t)));
  uint32_t* pb = static_cast<uint32_t*>(
      be.workspace(WorkSlot::kGemmB, static_cast<size_t>(panels * pairs * kNr) * sizeof(uint32_t)));
  const int threads = be.num_threads();
  const bool parallel = m * n * k > (int64_t{1} << 16);
#pragma omp parallel num_threads(threads) if (parallel)
  {
#pragma omp for schedule(static) nowait
    for (int64_t p = 0; p < panels; ++p)
      pack_b_panel(g.b, g.trans_b, n, k, pairs, p, pb + p * pairs * kNr);
      // Rows in blocks of 16 so the loop has enough iterations to balance.
#pragma omp for schedule(static)
    for (int64_t rb = 0; rb < (m + 15) / 16; ++rb)
      pack_a_rows(g.a, k, pairs, rb * 16, std::min(m, rb * 16 + 16), pa);
    // K blocks outermost (each C element sums its K blocks in order: deterministic); within a
    // block, tiles walk the rows of one panel so the packed B block is reused from cache.
    for (int64_t k0 = 0; k0 < pairs; k0 += kKcPairs) {
      const int64_t kp = std::min(kKcPairs, pairs - k0);
      const bool last = k0 + kp == pairs;
#pragma omp for schedule(static)
      for (int64_t tile = 0; tile < panels * m_tiles; ++tile) {
        const int64_t p = tile / m_tiles, mt = tile % m_tiles;
        const int64_t r0 = mt * kMr, c0 = p * kNr;
        TileArgs t;
        t.a = pa + r0 * pairs + k0;
        t.a_stride = pairs;
        t.b = pb + p * pairs * kNr + k0 * kNr;
        t.pairs = kp;
        t.c = g.c + r0 * n + c0;
        t.ldc = n;
        t.cols = std::min(kNr, n - c0);
        t.bias = last && g.bias != nullptr ? g.bias + c0 : nullptr;
        t.load_c = g.accumulate || k0 > 0;
        run_tile(std::min(kMr, m - r0), t);
      }
    }
  }
}

}  // namespace ledgerlm::cpu
