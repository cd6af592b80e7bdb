// fp64 reference ops, written as naive loops for clarity: what the backend tests compare a
// backend's result against (tests/backend/test_backend_ops.cpp on every backend of the build,
// tests/backend/test_ops_*.cpp on the CPU backend's own paths). Dropout masks are recomputed
// from the CPU's counter RNG, the one every backend must reproduce bit for bit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/common/random_keys.h"

namespace ledgerlm::testing {

// C = op(A) op(B) (+ C0 if accumulate) + bias, row-major; abs_sum (when given) receives
// sum_p |a_ip b_pj| per element, the scale of a product's rounding.
inline std::vector<double> naive_gemm(const std::vector<double>& a, const std::vector<double>& b,
                                      const std::vector<double>& c0,
                                      const std::vector<double>& bias, int64_t m, int64_t n,
                                      int64_t k, bool ta, bool tb, bool acc,
                                      std::vector<double>* abs_sum = nullptr) {
  std::vector<double> c(m * n);
  if (abs_sum) abs_sum->assign(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = acc ? c0[i * n + j] : 0.0, as = 0.0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
        s += x;
        as += std::fabs(x);
      }
      c[i * n + j] = s + (bias.empty() ? 0.0 : bias[j]);
      if (abs_sum) (*abs_sum)[i * n + j] = as;
    }
  return c;
}

// The attention dropout multiplier of element (b, h, i, j), keyed the way the kernels key it:
// keep / (1 - p) or 0, and 1 without dropout.
inline double attention_dropout_scale(const AttentionArgs& a, int64_t b, int64_t h, int64_t i,
                                      int64_t j) {
  if (a.dropout == 0.0) return 1.0;
  const uint64_t index = static_cast<uint64_t>((h * a.seq + i) * a.seq + j);
  const uint64_t sequence = a.first_sequence + static_cast<uint64_t>(b);
  const bool keep = dropout_bits(a.seed, a.site, sequence, index) >= dropout_threshold(a.dropout);
  return keep ? 1.0 / (1.0 - a.dropout) : 0.0;
}

struct AttentionRef {
  std::vector<double> out, lse, dqkv;  // dqkv only when dout was given
};

// Causal attention as an explicit T x T softmax (qkv rows [q | k | v], heads side by side), the
// dropout mask applied to the probabilities, one log-sum-exp per row; with `dout` non-empty
// also the exact gradient of sum(out * dout) with respect to qkv. Grouped-query attention
// (a.kv_heads): rows are [q: C | k: KV hd | v: KV hd], query head h reads kv head h / (H / KV),
// and a kv head's dk, dv collect from every query head of its group.
inline AttentionRef naive_attention(const std::vector<double>& qkv, const std::vector<double>& dout,
                                    const AttentionArgs& a) {
  const int64_t B = a.batch, Tn = a.seq, C = a.channels, H = a.heads, hd = C / H,
                row = a.qkv_width(), KV = a.kv();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const bool grad = !dout.empty();
  AttentionRef r{std::vector<double>(B * Tn * C, 0.0), std::vector<double>(B * H * Tn, 0.0),
                 std::vector<double>(grad ? B * Tn * row : 0, 0.0)};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      const int64_t kcol = C + (h / (H / KV)) * hd, vcol = kcol + KV * hd;
      auto q = [&](int64_t t, int64_t d) { return qkv[(b * Tn + t) * row + h * hd + d]; };
      auto k = [&](int64_t t, int64_t d) { return qkv[(b * Tn + t) * row + kcol + d]; };
      auto v = [&](int64_t t, int64_t d) { return qkv[(b * Tn + t) * row + vcol + d]; };
      auto dq = [&](int64_t t, int64_t d) -> double& {
        return r.dqkv[(b * Tn + t) * row + h * hd + d];
      };
      auto dk = [&](int64_t t, int64_t d) -> double& {
        return r.dqkv[(b * Tn + t) * row + kcol + d];
      };
      auto dv = [&](int64_t t, int64_t d) -> double& {
        return r.dqkv[(b * Tn + t) * row + vcol + d];
      };
      for (int64_t i = 0; i < Tn; ++i) {
        std::vector<double> p(i + 1), mk(i + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double s = 0;
          for (int64_t d = 0; d < hd; ++d) s += q(i, d) * k(j, d);
          p[j] = s * scale;
          mx = std::fmax(mx, p[j]);
          mk[j] = attention_dropout_scale(a, b, h, i, j);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(p[j] - mx);
        r.lse[(b * H + h) * Tn + i] = mx + std::log(sum);
        for (int64_t j = 0; j <= i; ++j) p[j] = std::exp(p[j] - mx) / sum;
        double big_d = 0;
        for (int64_t d = 0; d < hd; ++d) {
          double o = 0;
          for (int64_t j = 0; j <= i; ++j) o += p[j] * mk[j] * v(j, d);
          r.out[(b * Tn + i) * C + h * hd + d] = o;
          if (grad) big_d += o * dout[(b * Tn + i) * C + h * hd + d];
        }
        if (!grad) continue;
        for (int64_t j = 0; j <= i; ++j) {
          double dpv = 0;
          for (int64_t d = 0; d < hd; ++d) dpv += dout[(b * Tn + i) * C + h * hd + d] * v(j, d);
          const double ds = p[j] * (mk[j] * dpv - big_d) * scale;
          for (int64_t d = 0; d < hd; ++d) {
            dq(i, d) += ds * k(j, d);
            dk(j, d) += ds * q(i, d);
            dv(j, d) += p[j] * mk[j] * dout[(b * Tn + i) * C + h * hd + d];
          }
        }
      }
    }
  return r;
}

struct LayernormRef {
  std::vector<double> out, mean, rstd;
};

// Layer normalisation over rows of c (eps 1e-5, two-pass variance).
inline LayernormRef naive_layernorm(const std::vector<double>& x, const std::vector<double>& w,
                                    const std::vector<double>& bias, int64_t rows, int64_t c) {
  LayernormRef r{std::vector<double>(rows * c), std::vector<double>(rows),
                 std::vector<double>(rows)};
  for (int64_t row = 0; row < rows; ++row) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < c; ++i) m += x[row * c + i];
    m /= c;
    for (int64_t i = 0; i < c; ++i) v += (x[row * c + i] - m) * (x[row * c + i] - m);
    const double s = 1.0 / std::sqrt(v / c + 1e-5);
    r.mean[row] = m, r.rstd[row] = s;
    for (int64_t i = 0; i < c; ++i) r.out[row * c + i] = (x[row * c + i] - m) * s * w[i] + bias[i];
  }
  return r;
}

struct LayernormGrads {
  std::vector<double> dx, dweight, dbias;
};

// The layernorm backward, accumulated into dx0, dw0 and db0 (the backends' contract).
inline LayernormGrads naive_layernorm_backward(
    const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& dout,
    const std::vector<double>& dx0, const std::vector<double>& dw0, const std::vector<double>& db0,
    int64_t rows, int64_t c) {
  const LayernormRef f = naive_layernorm(x, w, std::vector<double>(c, 0.0), rows, c);
  LayernormGrads g{dx0, dw0, db0};
  for (int64_t row = 0; row < rows; ++row) {
    const double m = f.mean[row], s = f.rstd[row];
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < c; ++i) {
      const double xh = (x[row * c + i] - m) * s;
      sg += dout[row * c + i] * w[i];
      sgx += dout[row * c + i] * w[i] * xh;
      g.dweight[i] += dout[row * c + i] * xh;
      g.dbias[i] += dout[row * c + i];
    }
    for (int64_t i = 0; i < c; ++i) {
      const double xh = (x[row * c + i] - m) * s;
      g.dx[row * c + i] += s * (dout[row * c + i] * w[i] - sg / c - xh * sgx / c);
    }
  }
  return g;
}

struct CrossEntropyRef {
  std::vector<double> loss, dlogits;
};

// Softmax cross-entropy over the first `vocab` of `padded` columns per row: the loss per row and
// scale * (softmax - onehot) as the gradient (0 in the padding columns).
inline CrossEntropyRef naive_cross_entropy(const std::vector<double>& logits,
                                           const std::vector<int32_t>& targets, int64_t rows,
                                           int64_t vocab, int64_t padded, double scale) {
  CrossEntropyRef r{std::vector<double>(rows), std::vector<double>(rows * padded, 0.0)};
  for (int64_t row = 0; row < rows; ++row) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < vocab; ++j) mx = std::fmax(mx, logits[row * padded + j]);
    for (int64_t j = 0; j < vocab; ++j) sum += std::exp(logits[row * padded + j] - mx);
    r.loss[row] = mx + std::log(sum) - logits[row * padded + targets[row]];
    for (int64_t j = 0; j < vocab; ++j)
      r.dlogits[row * padded + j] =
          scale * (std::exp(logits[row * padded + j] - mx) / sum - (j == targets[row] ? 1.0 : 0.0));
  }
  return r;
}

// GELU (tanh approximation) and its derivative.
inline double gelu(double v) {
  return 0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
}
inline double gelu_grad(double v) {
  const double u = 0.7978845608028654 * (v + 0.044715 * v * v * v), th = std::tanh(u);
  return 0.5 * (1 + th) + 0.5 * v * (1 - th * th) * 0.7978845608028654 * (1 + 3 * 0.044715 * v * v);
}

}  // namespace ledgerlm::testing
