// One (batch, head) pair of the attention forward and backward (the algorithm is described in
// cpu_attention.cpp), written once over a "products" policy P that supplies the block products
// and the exp row:
//   P p(q, k, v, row, shape, work)   this head's operands (row: qkv row stride); `work` holds
//                                    three hd x T copies the policy may prepare (K^T, V, ...)
//   p.prepare_forward() / p.prepare_backward()
//   p.qk(i0, rows, keys, scale, s, lds)      S = scale * Q[i0:i0+rows] K[0:keys]^T
//   p.pv(s, lds, rows, keys, o, ldo)         O = P V[0:keys]
//   p.gv(g, ldg, rows, keys, s, lds)         dP = dO V[0:keys]^T
//   p.dv_add(s, lds, rows, keys, g, ldg, dv, ld)   dV[0:keys] += P^T dO
//   p.dq(s, lds, rows, keys, dq, ld)         dQ = dS K[0:keys]
//   p.dk_add(s, lds, rows, keys, i0, dk, ld) dK[0:keys] += dS^T Q[i0:i0+rows]
//   p.exp_row(x, n, mul, sub)                x = exp(x * mul - sub)
// cpu_attention.cpp instantiates it with BLAS products (fp64, and fp32 without a vector path),
// the ISA units (cpu_kernels_avx2.cpp, cpu_kernels_avx512.cpp) with register-tiled vector ones.
//
// Include inside the including unit's kernel namespace; its standard headers, cpu_attention.h
// and model/backend/common/random_keys.h (dropout bits) come first.

template <class T>
__attribute__((always_inline)) inline T attn_dot(const T* x, const T* y, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

// m[j] = keep_ij / (1 - p) for j in [0, count): elements base + j of batch row `b`'s sequence.
template <class T>
__attribute__((always_inline)) inline void attn_fill_mask(T* m, int64_t b, uint64_t base,
                                                          int64_t count, const AttentionArgs& a) {
  const uint64_t threshold = dropout_threshold(a.dropout);
  const T keep_scale = static_cast<T>(1.0 / (1.0 - a.dropout));
  const uint64_t sequence = a.first_sequence + static_cast<uint64_t>(b);
  std::array<uint32_t, 4> words{};
  for (int64_t j = 0; j < count; ++j) {
    const uint64_t idx = base + static_cast<uint64_t>(j);
    if (j == 0 || (idx & 3) == 0) words = dropout_words(a.seed, a.site, sequence, idx);
    m[j] = words[idx & 3] >= threshold ? keep_scale : T(0);
  }
}

// sc: a kQueryBlock x T block (row stride T), then a mask row of T, then the policy's work.
template <class T, class P>
__attribute__((always_inline)) inline void attn_forward_head(T* out, T* lse, const T* qkv,
                                                             const AttentionArgs& a,
                                                             const AttnShape& s, int64_t bh,
                                                             T* sc) {
  const int64_t row = s.row();
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
  const int64_t b = bh / s.h, h = bh % s.h;
  const T* base = qkv + b * s.t * row;
  const T* q = base + h * s.hd;
  T* o = out + b * s.t * s.c + h * s.hd;
  T* mask = sc + 2 * kQueryBlock * s.t;
  P p(q, base + s.k_col(h), base + s.v_col(h), row, s, mask + s.t);
  p.prepare_forward();
  for (int64_t i0 = 0; i0 < s.t; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, s.t - i0), keys = i0 + rows;
    p.qk(i0, rows, keys, scale, sc, s.t);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      T* pr = sc + r * s.t;
      // Vector reductions (a fixed lane-wise order: deterministic, not left-to-right).
      T mx = -INFINITY;
#pragma omp simd reduction(max : mx)
      for (int64_t j = 0; j <= i; ++j) mx = pr[j] > mx ? pr[j] : mx;
      p.exp_row(pr, i + 1, T(1), mx);
      T sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j <= i; ++j) sum += pr[j];
      const T inv = T(1) / sum;
      if (drop) {
        attn_fill_mask(mask, b, static_cast<uint64_t>((h * s.t + i) * s.t), i + 1, a);
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) pr[j] *= inv * mask[j];
      } else {
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) pr[j] *= inv;
      }
      for (int64_t j = i + 1; j < keys; ++j) pr[j] = T(0);  // causal mask within the block
      lse[bh * s.t + i] = mx + std::log(sum);
    }
    p.pv(sc, s.t, rows, keys, o + i0 * s.c, s.c);
  }
}

// It owns this head's rows of dq, dk and dv. sc: two kQueryBlock x T blocks (row stride T), a
// mask row of T, then the policy's work.
template <class T, class P>
__attribute__((always_inline)) inline void attn_backward_head(T* dqkv, const T* dout, const T* qkv,
                                                              const T* out, const T* lse,
                                                              const AttentionArgs& a,
                                                              const AttnShape& s, int64_t bh,
                                                              T* sc) {
  const int64_t row = s.row();
  const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
  const bool drop = a.dropout > 0.0;
  const int64_t b = bh / s.h, h = bh % s.h;
  const T* base = qkv + b * s.t * row;
  const T* q = base + h * s.hd;
  T* dbase = dqkv + b * s.t * row;
  T* dq = dbase + h * s.hd;
  T* dk = dbase + s.k_col(h);
  T* dv = dbase + s.v_col(h);
  const T* g = dout + b * s.t * s.c + h * s.hd;
  const T* o = out + b * s.t * s.c + h * s.hd;
  T* ds = sc + kQueryBlock * s.t;
  T* mask = ds + kQueryBlock * s.t;
  P p(q, base + s.k_col(h), base + s.v_col(h), row, s, mask + s.t);
  p.prepare_backward();
  // dk and dv of this head's kv head are sums over query blocks and over the query heads that
  // share it (grouped-query attention), which the caller runs in head order: the first clears
  // them, then each accumulates.
  if (h % (s.h / s.kv) == 0)
    for (int64_t j = 0; j < s.t; ++j)
      for (int64_t d = 0; d < s.hd; ++d) dk[j * row + d] = dv[j * row + d] = T(0);
  for (int64_t i0 = 0; i0 < s.t; i0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, s.t - i0), keys = i0 + rows;
    // Recomputed scores and dP~ = dout . v for the whole block, then the rows elementwise.
    p.qk(i0, rows, keys, scale, sc, s.t);
    p.gv(g + i0 * s.c, s.c, rows, keys, ds, s.t);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t i = i0 + r;
      T* pr = sc + r * s.t;
      T* dp = ds + r * s.t;
      const T big_d = attn_dot(g + i * s.c, o + i * s.c, s.hd);
      p.exp_row(pr, i + 1, T(1), lse[bh * s.t + i]);
      if (drop) {
        attn_fill_mask(mask, b, static_cast<uint64_t>((h * s.t + i) * s.t), i + 1, a);
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) {
          dp[j] = pr[j] * (mask[j] * dp[j] - big_d) * scale;
          pr[j] *= mask[j];
        }
      } else {
#pragma omp simd
        for (int64_t j = 0; j <= i; ++j) dp[j] = pr[j] * (dp[j] - big_d) * scale;
      }
      for (int64_t j = i + 1; j < keys; ++j) pr[j] = dp[j] = T(0);  // causal mask in the block
    }
    // dV[0:keys] += P~^T dO,  dQ = dS K,  dK[0:keys] += dS^T Q.
    p.dv_add(sc, s.t, rows, keys, g + i0 * s.c, s.c, dv, row);
    p.dq(ds, s.t, rows, keys, dq + i0 * row, row);
    p.dk_add(ds, s.t, rows, keys, i0, dk, row);
  }
}
