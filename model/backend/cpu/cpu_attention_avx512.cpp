// AVX-512 block products of the fp32 attention kernel (see cpu_attention_avx512.h).
//
// scores: a 4-row x 48-column tile of S lives in 12 zmm accumulators; per step of the reduced
// index d it loads three 16-wide vectors of the transposed operand and broadcasts one value per
// row (12 FMAs per 7 loads). combine: a 4-row x 64-column tile of O in 16 accumulators; per
// inner index j it loads four vectors of v's row j and broadcasts p[r][j] per row. Edges are
// handled with masked loads/stores (columns) and smaller row templates (rows). The loops over
// the tile are fully unrolled (GCC unroll pragmas) so that the accumulator arrays live in
// registers; rolled, GCC keeps them on the stack and every FMA pays a store and a reload.
#include "model/backend/cpu/cpu_attention_avx512.h"

#include <immintrin.h>

#include <algorithm>

#include "model/backend/cpu/cpu_simd.h"

#define LLM_TARGET_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq")))

namespace ledgerlm::cpu {
namespace {

inline __mmask16 lanes(int64_t count) {
  return count >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << std::max<int64_t>(count, 0)) - 1);
}

constexpr int64_t kScoreRows = 4, kScoreVecs = 3;      // 4 x 48 tile
constexpr int64_t kCombineRows = 4, kCombineVecs = 4;  // 4 x 64 tile

template <int MR>
LLM_TARGET_AVX512 void scores_tile(const float* x, int64_t ldx, const float* yt, int64_t ldyt,
                                   int64_t cols, int64_t depth, float scale, float* s,
                                   int64_t lds) {
  __m512 acc[MR][kScoreVecs];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < kScoreVecs; ++c) acc[r][c] = _mm512_setzero_ps();
  const __mmask16 m0 = lanes(cols), m1 = lanes(cols - 16), m2 = lanes(cols - 32);
  for (int64_t d = 0; d < depth; ++d) {
    const float* y = yt + d * ldyt;
    const __m512 y0 = _mm512_maskz_loadu_ps(m0, y);
    const __m512 y1 = _mm512_maskz_loadu_ps(m1, y + 16);
    const __m512 y2 = _mm512_maskz_loadu_ps(m2, y + 32);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * ldx + d]);
      acc[r][0] = _mm512_fmadd_ps(xb, y0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xb, y1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(xb, y2, acc[r][2]);
    }
  }
  const __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* out = s + r * lds;
    _mm512_mask_storeu_ps(out, m0, _mm512_mul_ps(acc[r][0], vs));
    _mm512_mask_storeu_ps(out + 16, m1, _mm512_mul_ps(acc[r][1], vs));
    _mm512_mask_storeu_ps(out + 32, m2, _mm512_mul_ps(acc[r][2], vs));
  }
}

// p element (r, j) at p[r * prs + j * pjs]; v rows of `NV` vectors.
template <int MR, int NV>
LLM_TARGET_AVX512 void combine_tile(const float* p, int64_t prs, int64_t pjs, const float* v,
                                    int64_t ldv, int64_t inner, float* o, int64_t ldo,
                                    bool accumulate) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_setzero_ps();
  for (int64_t j = 0; j < inner; ++j) {
    __m512 vv[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) vv[c] = _mm512_loadu_ps(v + j * ldv + 16 * c);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 pb = _mm512_set1_ps(p[r * prs + j * pjs]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] = _mm512_fmadd_ps(pb, vv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      float* out = o + r * ldo + 16 * c;
      _mm512_storeu_ps(out,
                       accumulate ? _mm512_add_ps(_mm512_loadu_ps(out), acc[r][c]) : acc[r][c]);
    }
}

template <int MR>
void combine_rows(const float* p, int64_t prs, int64_t pjs, const float* v, int64_t ldv,
                  int64_t inner, int64_t width, float* o, int64_t ldo, bool accumulate) {
  for (int64_t c0 = 0; c0 < width; c0 += 16 * kCombineVecs) {
    const int64_t nv = std::min<int64_t>(kCombineVecs, (width - c0) / 16);
    switch (nv) {
      case 4:
        combine_tile<MR, 4>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
      case 3:
        combine_tile<MR, 3>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
      case 2:
        combine_tile<MR, 2>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
      default:
        combine_tile<MR, 1>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
    }
  }
}

}  // namespace

bool cpu_attention_blocks_usable(int64_t head_dim) {
  return head_dim > 0 && head_dim % 16 == 0 && cpu_has_avx512();
}

void cpu_attention_scores(const float* x, int64_t ldx, const float* yt, int64_t ldyt, int64_t rows,
                          int64_t cols, int64_t depth, float scale, float* s, int64_t lds) {
  constexpr int64_t kTileCols = 16 * kScoreVecs;
  for (int64_t r0 = 0; r0 < rows; r0 += kScoreRows) {
    const int64_t mr = std::min(kScoreRows, rows - r0);
    for (int64_t j0 = 0; j0 < cols; j0 += kTileCols) {
      const int64_t nc = std::min(kTileCols, cols - j0);
      const float* xr = x + r0 * ldx;
      float* sr = s + r0 * lds + j0;
      switch (mr) {
        case 4:
          scores_tile<4>(xr, ldx, yt + j0, ldyt, nc, depth, scale, sr, lds);
          break;
        case 3:
          scores_tile<3>(xr, ldx, yt + j0, ldyt, nc, depth, scale, sr, lds);
          break;
        case 2:
          scores_tile<2>(xr, ldx, yt + j0, ldyt, nc, depth, scale, sr, lds);
          break;
        default:
          scores_tile<1>(xr, ldx, yt + j0, ldyt, nc, depth, scale, sr, lds);
          break;
      }
    }
  }
}

void cpu_attention_combine(const float* p, int64_t prs, int64_t pjs, const float* v, int64_t ldv,
                           int64_t rows, int64_t inner, int64_t width, float* o, int64_t ldo,
                           bool accumulate) {
  for (int64_t r0 = 0; r0 < rows; r0 += kCombineRows) {
    const int64_t mr = std::min(kCombineRows, rows - r0);
    const float* pr = p + r0 * prs;
    float* orow = o + r0 * ldo;
    switch (mr) {
      case 4:
        combine_rows<4>(pr, prs, pjs, v, ldv, inner, width, orow, ldo, accumulate);
        break;
      case 3:
        combine_rows<3>(pr, prs, pjs, v, ldv, inner, width, orow, ldo, accumulate);
        break;
      case 2:
        combine_rows<2>(pr, prs, pjs, v, ldv, inner, width, orow, ldo, accumulate);
        break;
      default:
        combine_rows<1>(pr, prs, pjs, v, ldv, inner, width, orow, ldo, accumulate);
        break;
    }
  }
}

void cpu_attention_transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                             int64_t ldd) {
  // Plain loops over 16-row strips: the 16 stores of a strip into one destination row share a
  // cache line. (AVX-512 scatters measured several times slower than this on the Xeon tuned on.)
  for (int64_t r0 = 0; r0 < rows; r0 += 16) {
    const int64_t r1 = std::min(rows, r0 + 16);
    for (int64_t c = 0; c < cols; ++c)
      for (int64_t r = r0; r < r1; ++r) dst[c * ldd + r] = src[r * lds + c];
  }
}

}  // namespace ledgerlm::cpu
