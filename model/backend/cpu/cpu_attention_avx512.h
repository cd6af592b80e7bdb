// Register-tiled AVX-512 block products for the fp32 attention kernel (cpu_attention.cpp). One
// (batch, head) pair's query block is small (32 rows, head_dim columns), so a BLAS call per
// product spends much of its time packing; these work on the operands in place (keys and values
// transposed once per head) and keep their output tiles in registers. Every output element sums
// its terms in ascending order of the reduced index: deterministic, like the BLAS path they
// replace (whose results they match to fp32 rounding, not bit for bit).
#pragma once

#include <cstdint>

namespace ledgerlm::cpu {

// Usable when the CPU has AVX-512F and head_dim is a multiple of 16.
bool cpu_attention_blocks_usable(int64_t head_dim);

// s[r][j] = scale * sum_d x[r][d] * yt[d][j] for r < rows, j < cols. x rows have stride ldx,
// yt is [depth][ldyt] (the other operand transposed), s rows have stride lds.
void cpu_attention_scores(const float* x, int64_t ldx, const float* yt, int64_t ldyt, int64_t rows,
                          int64_t cols, int64_t depth, float scale, float* s, int64_t lds);

// o[r][:] (+)= sum_j p(r, j) * v[j][:] for r < rows, j < inner, width columns (a multiple of
// 16), with p(r, j) = p[r * prs + j * pjs]: (prs, pjs) = (ld, 1) reads p as stored, (1, ld)
// reads its transpose without copying it. v rows have stride ldv, o rows ldo; accumulate adds
// the sum to o.
void cpu_attention_combine(const float* p, int64_t prs, int64_t pjs, const float* v, int64_t ldv,
                           int64_t rows, int64_t inner, int64_t width, float* o, int64_t ldo,
                           bool accumulate);

// dst[c][r] = src[r * lds + c] for r < rows, c < cols (dst rows have stride ldd).
void cpu_attention_transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
                             int64_t ldd);

}  // namespace ledgerlm::cpu
