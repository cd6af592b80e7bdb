// Register-tiled block products of the fp32 attention kernel, written once against `Vec`, and
// the products policy (cpu_attention_head.h) built on them. One (batch, head) pair's query block
// is small (32 rows, head_dim columns), so a BLAS call per product spends much of its time
// packing; these work on the operands in place (keys and values transposed once per head) and
// keep their output tiles in registers. Every output element sums its terms in ascending order
// of the reduced index: deterministic, like the BLAS path they replace (whose results they match
// to fp32 rounding, not bit for bit).
//
// scores: an MR-row x (NV vectors)-column tile of S lives in MR*NV accumulators; per step of the
// reduced index d it loads NV vectors of the transposed operand and broadcasts one value per row.
// combine: an MR-row x (NV vectors) tile of O; per inner index j it loads NV vectors of v's row j
// and broadcasts p(r, j) per row. Column edges use partial loads/stores, row edges smaller row
// templates. The tile loops are fully unrolled (GCC unroll pragmas) so that the accumulator
// arrays live in registers; rolled, GCC keeps them on the stack and every FMA pays a store and a
// reload. The including unit sets the tile sizes for its register count (kScoreRows,
// kScoreVecs, kCombineRows, kCombineVecs) and includes cpu_kernels_body.h first.

// An accumulator tile set to zero (unrolled, so that the tile stays in registers).
template <int MR, int NV>
LLM_INLINE void zero_tile(Vec (&acc)[MR][NV]) {
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) acc[r][c] = Vec::zero();
}

template <int MR, int NV, bool kFull>
LLM_INLINE void scores_tile(const float* x, int64_t ldx, const float* yt, int64_t ldyt,
                            int64_t cols, int64_t depth, float scale, float* s, int64_t lds) {
  constexpr int W = Vec::kLanes;
  Vec acc[MR][NV];
  zero_tile(acc);
  for (int64_t d = 0; d < depth; ++d) {
    const float* y = yt + d * ldyt;
    Vec yv[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c)
      yv[c] = kFull ? Vec::load(y + c * W) : Vec::load_part(y + c * W, cols - c * W);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const Vec xb = Vec::set1(x[r * ldx + d]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] = Vec::fmadd(xb, yv[c], acc[r][c]);
    }
  }
  const Vec vs = Vec::set1(scale);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      const Vec out = acc[r][c] * vs;
      if (kFull)
        out.store(s + r * lds + c * W);
      else
        out.store_part(s + r * lds + c * W, cols - c * W);
    }
}

// p element (r, j) at p[r * prs + j * pjs]; v rows of NV vectors.
template <int MR, int NV>
LLM_INLINE void combine_tile(const float* p, int64_t prs, int64_t pjs, const float* v, int64_t ldv,
                             int64_t inner, float* o, int64_t ldo, bool accumulate) {
  constexpr int W = Vec::kLanes;
  Vec acc[MR][NV];
  zero_tile(acc);
  for (int64_t j = 0; j < inner; ++j) {
    Vec vv[NV];
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) vv[c] = Vec::load(v + j * ldv + W * c);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const Vec pb = Vec::set1(p[r * prs + j * pjs]);
#pragma GCC unroll 8
      for (int c = 0; c < NV; ++c) acc[r][c] = Vec::fmadd(pb, vv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      float* out = o + r * ldo + W * c;
      (accumulate ? Vec::load(out) + acc[r][c] : acc[r][c]).store(out);
    }
}

template <int MR>
void scores_rows(const float* x, int64_t ldx, const float* yt, int64_t ldyt, int64_t cols,
                 int64_t depth, float scale, float* s, int64_t lds) {
  constexpr int64_t kTileCols = Vec::kLanes * kScoreVecs;
  for (int64_t j0 = 0; j0 < cols; j0 += kTileCols) {
    const int64_t nc = std::min(kTileCols, cols - j0);
    if (nc == kTileCols)
      scores_tile<MR, kScoreVecs, true>(x, ldx, yt + j0, ldyt, nc, depth, scale, s + j0, lds);
    else
      scores_tile<MR, kScoreVecs, false>(x, ldx, yt + j0, ldyt, nc, depth, scale, s + j0, lds);
  }
}

// s[r][j] = scale * sum_d x[r][d] * yt[d][j] for r < rows, j < cols. x rows have stride ldx,
// yt is [depth][ldyt] (the other operand transposed), s rows have stride lds. Causal: with
// first_query >= 0, row r is query first_query + r and only its keys j <= first_query + r are
// computed (per row group, so a group's columns run to its last row's key; the rest of each row
// is left for the caller, which masks it).
void attn_scores(const float* x, int64_t ldx, const float* yt, int64_t ldyt, int64_t rows,
                 int64_t cols, int64_t depth, float scale, float* s, int64_t lds,
                 int64_t first_query) {
  static_assert(kScoreRows == 4, "scores row dispatch below covers 1..4 rows");
  for (int64_t r0 = 0; r0 < rows; r0 += kScoreRows) {
    const int64_t mr = std::min<int64_t>(kScoreRows, rows - r0);
    const int64_t nc = first_query < 0 ? cols : std::min(cols, first_query + r0 + mr);
    const float* xr = x + r0 * ldx;
    float* sr = s + r0 * lds;
    switch (mr) {
      case 4:
        scores_rows<4>(xr, ldx, yt, ldyt, nc, depth, scale, sr, lds);
        break;
      case 3:
        scores_rows<3>(xr, ldx, yt, ldyt, nc, depth, scale, sr, lds);
        break;
      case 2:
        scores_rows<2>(xr, ldx, yt, ldyt, nc, depth, scale, sr, lds);
        break;
      default:
        scores_rows<1>(xr, ldx, yt, ldyt, nc, depth, scale, sr, lds);
        break;
    }
  }
}

template <int MR>
void combine_rows(const float* p, int64_t prs, int64_t pjs, const float* v, int64_t ldv,
                  int64_t inner, int64_t width, float* o, int64_t ldo, bool accumulate) {
  constexpr int64_t W = Vec::kLanes;
  static_assert(kCombineVecs >= 1 && kCombineVecs <= 4, "combine width dispatch covers 1..4");
  for (int64_t c0 = 0; c0 < width; c0 += W * kCombineVecs) {
    const int64_t nv = std::min<int64_t>(kCombineVecs, (width - c0) / W);
    switch (nv) {
      case 4:
        if constexpr (kCombineVecs >= 4)
          combine_tile<MR, 4>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
      case 3:
        if constexpr (kCombineVecs >= 3)
          combine_tile<MR, 3>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
      case 2:
        if constexpr (kCombineVecs >= 2)
          combine_tile<MR, 2>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
      default:
        combine_tile<MR, 1>(p, prs, pjs, v + c0, ldv, inner, o + c0, ldo, accumulate);
        break;
    }
  }
}

// Which terms of a combine's sums the causal mask makes zero, so that they are not summed.
struct CausalTerms {
  // kQueries: row r is query first_query + r, inner j a key: terms j > first_query + r are zero.
  // kKeys: row r is key r, inner j query first_query + j: terms with first_query + j < r are zero.
  enum Kind { kNone, kQueries, kKeys } kind = kNone;
  int64_t first_query = 0;
};

// o[r][:] (+)= sum_j p(r, j) * v[j][:] for r < rows, j < inner, width columns (a multiple of the
// vector width), with p(r, j) = p[r * prs + j * pjs]: (prs, pjs) = (ld, 1) reads p as stored,
// (1, ld) reads its transpose without copying it. v rows have stride ldv, o rows ldo; accumulate
// adds the sum to o. `causal` names the terms known to be zero (p's masked part): each row group
// sums only its range of j that can be non-zero, in the same ascending order (skipping exact
// zeros, so the sums are those of the whole range).
void attn_combine(const float* p, int64_t prs, int64_t pjs, const float* v, int64_t ldv,
                  int64_t rows, int64_t inner, int64_t width, float* o, int64_t ldo,
                  bool accumulate, CausalTerms causal) {
  static_assert(kCombineRows >= 1 && kCombineRows <= 6, "combine row dispatch covers 1..6 rows");
  for (int64_t r0 = 0; r0 < rows; r0 += kCombineRows) {
    const int64_t mr = std::min<int64_t>(kCombineRows, rows - r0);
    int64_t j0 = 0, j1 = inner;
    if (causal.kind == CausalTerms::kQueries) j1 = std::min(inner, causal.first_query + r0 + mr);
    if (causal.kind == CausalTerms::kKeys)
      j0 = std::clamp<int64_t>(r0 - causal.first_query, 0, inner);
    const float* pr = p + r0 * prs + j0 * pjs;
    const float* vr = v + j0 * ldv;
    const int64_t n = j1 - j0;
    float* orow = o + r0 * ldo;
    switch (mr) {
      case 6:
        if constexpr (kCombineRows >= 6)
          combine_rows<6>(pr, prs, pjs, vr, ldv, n, width, orow, ldo, accumulate);
        break;
      case 5:
        if constexpr (kCombineRows >= 5)
          combine_rows<5>(pr, prs, pjs, vr, ldv, n, width, orow, ldo, accumulate);
        break;
      case 4:
        if constexpr (kCombineRows >= 4)
          combine_rows<4>(pr, prs, pjs, vr, ldv, n, width, orow, ldo, accumulate);
        break;
      case 3:
        if constexpr (kCombineRows >= 3)
          combine_rows<3>(pr, prs, pjs, vr, ldv, n, width, orow, ldo, accumulate);
        break;
      case 2:
        if constexpr (kCombineRows >= 2)
          combine_rows<2>(pr, prs, pjs, vr, ldv, n, width, orow, ldo, accumulate);
        break;
      default:
        combine_rows<1>(pr, prs, pjs, vr, ldv, n, width, orow, ldo, accumulate);
        break;
    }
  }
}

// dst[0:8][0:8] = the transpose of src[0:8][0:8], in registers: pairs of rows interleaved,
// then pairs of pairs, then the 128-bit halves swapped into place (AVX, which every target
// including this body has).
LLM_INLINE void transpose_8x8(const float* src, int64_t lds, float* dst, int64_t ldd) {
  __m256 r[8], t[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * lds);
#pragma GCC unroll 4
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 2
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(dst + i * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(dst + (i + 4) * ldd, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}

// dst[c][r] = src[r * lds + c] for r < rows, c < cols (dst rows have stride ldd): 8 x 8 blocks
// in registers, plain loops for the edges. (Scalar loops measured ~9% of the avx2 attention;
// AVX-512 scatters measured several times slower than plain loops on a Xeon.)
void attn_transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                    int64_t ldd) {
  const int64_t rows8 = rows - rows % 8, cols8 = cols - cols % 8;
  for (int64_t r0 = 0; r0 < rows8; r0 += 8)
    for (int64_t c0 = 0; c0 < cols8; c0 += 8)
      transpose_8x8(src + r0 * lds + c0, lds, dst + c0 * ldd + r0, ldd);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = r < rows8 ? cols8 : 0; c < cols; ++c) dst[c * ldd + r] = src[r * lds + c];
}

// Dense [T][hd] copy of strided rows: P V and dS K stream them contiguously.
void attn_copy_rows(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst) {
  for (int64_t j = 0; j < rows; ++j) std::copy(src + j * lds, src + j * lds + cols, dst + j * cols);
}

// The products policy of cpu_attention_head.h on the tiles above. work holds three hd x T
// copies: forward K^T and V (dense rows); backward K^T, V^T and K (dense rows).
struct VecProducts {
  const float *q, *k, *v;
  int64_t row, t, hd;
  float *w0, *w1, *w2;
  VecProducts(const float* q_, const float* k_, const float* v_, int64_t row_, const AttnShape& s,
              float* work)
      : q(q_),
        k(k_),
        v(v_),
        row(row_),
        t(s.t),
        hd(s.hd),
        w0(work),
        w1(work + s.hd * s.t),
        w2(work + 2 * s.hd * s.t) {}
  void prepare_forward() {
    attn_transpose(k, row, t, hd, w0, t);  // K^T
    attn_copy_rows(v, row, t, hd, w1);     // V
  }
  void prepare_backward() {
    attn_transpose(k, row, t, hd, w0, t);  // K^T
    attn_transpose(v, row, t, hd, w1, t);  // V^T
    attn_copy_rows(k, row, t, hd, w2);     // K
  }
  // A query block is rows [i0, i0 + rows) against keys [0, keys = i0 + rows): in the block's
  // diagonal square half the scores are masked, and only the unmasked part is computed or summed
  // (the caller zeroes the masked scores it gets; they are never read before that).
  void qk(int64_t i0, int64_t rows, int64_t keys, float scale, float* s, int64_t lds) {
    attn_scores(q + i0 * row, row, w0, t, rows, keys, hd, scale, s, lds, i0);
  }
  void pv(const float* s, int64_t lds, int64_t rows, int64_t keys, float* o, int64_t ldo) {
    attn_combine(s, lds, 1, w1, hd, rows, keys, hd, o, ldo, false, queries(keys - rows));
  }
  void gv(const float* g, int64_t ldg, int64_t rows, int64_t keys, float* s, int64_t lds) {
    attn_scores(g, ldg, w1, t, rows, keys, hd, 1.0f, s, lds, keys - rows);
  }
  void dv_add(const float* s, int64_t lds, int64_t rows, int64_t keys, const float* g, int64_t ldg,
              float* dv, int64_t ld) {
    attn_combine(s, 1, lds, g, ldg, keys, rows, hd, dv, ld, true, keys_of(keys - rows));
  }
  void dq(const float* s, int64_t lds, int64_t rows, int64_t keys, float* dq, int64_t ld) {
    attn_combine(s, lds, 1, w2, hd, rows, keys, hd, dq, ld, false, queries(keys - rows));
  }
  void dk_add(const float* s, int64_t lds, int64_t rows, int64_t keys, int64_t i0, float* dk,
              int64_t ld) {
    attn_combine(s, 1, lds, q + i0 * row, row, keys, rows, hd, dk, ld, true, keys_of(i0));
  }
  static CausalTerms queries(int64_t i0) { return {CausalTerms::kQueries, i0}; }
  static CausalTerms keys_of(int64_t i0) { return {CausalTerms::kKeys, i0}; }
  void exp_row(float* x, int64_t n, float mul, float sub) { k_exp_affine(x, n, mul, sub); }
};
