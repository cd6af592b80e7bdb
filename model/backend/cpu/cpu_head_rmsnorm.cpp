// Weightless RMS norm of each attention head (model.qk_norm; Backend::head_rmsnorm_forward and
// _backward): per row and head, over head_dim values. Rows run in parallel and each (row, head)
// is reduced on its own in a fixed order: deterministic for any thread count or batch split.
#include <cmath>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

template <class T>
void head_rms_forward(T* x, T* rstd, int64_t rows, int64_t heads, int64_t hd, int64_t stride,
                      double eps, int threads) {
  const T e = static_cast<T>(eps), inv_n = T(1) / static_cast<T>(hd);
  parallel_rows(rows, threads, rows * heads * hd > 16384, [&](int64_t r) {
    for (int64_t h = 0; h < heads; ++h) {
      T* v = x + r * stride + h * hd;
      T ss = 0;
#pragma omp simd reduction(+ : ss)
      for (int64_t d = 0; d < hd; ++d) ss += v[d] * v[d];
      const T s = T(1) / std::sqrt(ss * inv_n + e);
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) v[d] *= s;
      rstd[r * heads + h] = s;
    }
  });
}

template <class T>
void head_rms_backward(T* dx, const T* y, const T* rstd, int64_t rows, int64_t heads, int64_t hd,
                       int64_t stride, int threads) {
  const T inv_n = T(1) / static_cast<T>(hd);
  parallel_rows(rows, threads, rows * heads * hd > 16384, [&](int64_t r) {
    for (int64_t h = 0; h < heads; ++h) {
      T* g = dx + r * stride + h * hd;
      const T* yv = y + r * stride + h * hd;
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < hd; ++d) dot += g[d] * yv[d];
      const T s = rstd[r * heads + h], m = dot * inv_n;
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) g[d] = s * (g[d] - yv[d] * m);
    }
  });
}

void require_heads(int64_t heads, int64_t hd, int64_t stride, const char* op) {
  LLM_REQUIRE(heads > 0 && hd > 0 && stride >= heads * hd, "cpu backend: ", op,
              " needs heads, head_dim > 0 and stride >= heads x head_dim");
}

}  // namespace

void CpuBackend::head_rmsnorm_forward(Tensor x, Tensor rstd, int64_t rows, int64_t heads,
                                      int64_t head_dim, int64_t stride, double eps) {
  if (rows <= 0) return;
  const DType act = require_act_dtype(x, "head_rmsnorm_forward x");
  require_act(rstd, act, "head_rmsnorm_forward rstd");
  require_heads(heads, head_dim, stride, "head_rmsnorm_forward");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    head_rms_forward<T>(x.as<T>(), rstd.as<T>(), rows, heads, head_dim, stride, eps, threads_);
  });
}

void CpuBackend::head_rmsnorm_backward(Tensor dx, Tensor y, Tensor rstd, int64_t rows,
                                       int64_t heads, int64_t head_dim, int64_t stride) {
  if (rows <= 0) return;
  const DType act = require_act_dtype(dx, "head_rmsnorm_backward dx");
  require_act(y, act, "head_rmsnorm_backward y");
  require_act(rstd, act, "head_rmsnorm_backward rstd");
  require_heads(heads, head_dim, stride, "head_rmsnorm_backward");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    head_rms_backward<T>(dx.as<T>(), y.as<const T>(), rstd.as<const T>(), rows, heads, head_dim,
                         stride, threads_);
  });
}

}  // namespace ledgerlm::cpu
