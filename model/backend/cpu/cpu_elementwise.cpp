// Elementwise activation ops: residual add, GELU (tanh approximation) forward/backward (alone,
// or fused with the bias gradient of the layer before it), and inverted dropout keyed by (seed,
// site, global-batch sequence, element).
//
// All loops are split into fixed chunks (results do not depend on the thread count) and written
// as plain loops gcc vectorises, except where exp and the Philox draws keep them scalar; fp32
// GELU runs the kernel table of the backend's path (cpu_kernels.h), fp64 the loops here.
#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

#include "model/backend/common/op_constants.h"
#include "model/backend/common/random_keys.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

// tanh(u) = 1 - 2 / (1 + exp(2u)): glibc's exp is several times cheaper than its tanh, and the
// form saturates correctly (exp overflow to inf gives 1, underflow to 0 gives -1). Its absolute
// error stays at the rounding level, which is what GELU's 0.5 x (1 + tanh) needs.
template <class T>
inline T tanh_via_exp(T u) {
  return T(1) - T(2) / (T(1) + std::exp(T(2) * u));
}

}  // namespace

void CpuBackend::add(Tensor out, Tensor a, Tensor b, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(a, "add a");
  require_act(b, act, "add b");
  require_act(out, act, "add out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* x = a.as<const T>();
    const T* y = b.as<const T>();
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) o[i] = x[i] + y[i];
    });
  });
}

void CpuBackend::gelu_forward(Tensor out, Tensor x, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "gelu_forward x");
  require_act(out, act, "gelu_forward out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* xp = x.as<const T>();
    const T k = static_cast<T>(kGeluSqrt2OverPi), cubic = static_cast<T>(kGeluCubic);
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        kern.gelu_forward(o + begin, xp + begin, end - begin);
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        const T v = xp[i];
        const T u = k * (v + cubic * v * v * v);
        o[i] = T(0.5) * v * (T(1) + tanh_via_exp(u));
      }
    });
  });
}

void CpuBackend::gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "gelu_backward x");
  require_act(dx, act, "gelu_backward dx");
  require_act(dout, act, "gelu_backward dout");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* d = dx.as<T>();
    const T* xp = x.as<const T>();
    const T* g = dout.as<const T>();
    const T k = static_cast<T>(kGeluSqrt2OverPi), cubic = static_cast<T>(kGeluCubic);
    const CpuKernels& kern = *kernels_;
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      if constexpr (std::is_same_v<T, float>) {
        kern.gelu_backward(d + begin, xp + begin, g + begin, end - begin);
        return;
      }
      for (int64_t i = begin; i < end; ++i) {
        const T v = xp[i];
        const T th = tanh_via_exp(k * (v + cubic * v * v * v));
        const T du = k * (T(1) + T(3) * cubic * v * v);
        const T grad = T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du;
        d[i] = g[i] * grad;  // written, not accumulated (dx may alias dout)
      }
    });
  });
}

// One pass over the rows: each of `threads` fixed row chunks computes its rows of dx and sums
// them, in row order, into its partial bias row; the partials are added in chunk order. The
// same elementwise values and the same summation order as gelu_backward then bias_backward.
void CpuBackend::gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout, int64_t rows,
                                    int64_t channels) {
  const DType act = require_act_dtype(x, "gelu_bias_backward x");
  if (act != DType::kF32) return Backend::gelu_bias_backward(dx, dbias, x, dout, rows, channels);
  require_act(dx, act, "gelu_bias_backward dx");
  require_act(dout, act, "gelu_bias_backward dout");
  require_float(dbias, "gelu_bias_backward dbias");
  LLM_REQUIRE(rows >= 0 && channels >= 0, "cpu backend: gelu_bias_backward sizes must be >= 0");
  if (rows == 0 || channels == 0) return;
  const int64_t n = channels, chunks = std::min<int64_t>(threads_, rows);
  float* partial = static_cast<float*>(
      workspace(WorkSlot::kPartials, static_cast<size_t>(chunks * n) * sizeof(float)));
  float* d = dx.as<float>();
  const float* xp = x.as<const float>();
  const float* g = dout.as<const float>();
  const CpuKernels& kern = *kernels_;
  parallel_row_ranges(rows, chunks, threads_, rows * n > 16384,
                      [&](int64_t c, int64_t begin, int64_t end) {
                        float* acc = partial + c * n;
                        for (int64_t j = 0; j < n; ++j) acc[j] = 0.0f;
                        for (int64_t r = begin; r < end; ++r) {
                          float* row = d + r * n;
                          kern.gelu_backward(row, xp + r * n, g + r * n, n);
#pragma omp simd
                          for (int64_t j = 0; j < n; ++j) acc[j] += row[j];
                        }
                      });
  sum_chunk_partials(partial, chunks, n, n);
  row_accumulate(dbias, 0, n, partial);
}

void CpuBackend::dropout(Tensor x, int64_t n, double p, const DropoutKey& key) {
  LLM_REQUIRE(p >= 0.0 && p < 1.0, "cpu backend: dropout probability must be in [0, 1), got ", p);
  if (n <= 0 || p == 0.0) return;
  LLM_REQUIRE(key.sequence_elements > 0 && n % key.sequence_elements == 0,
              "cpu backend: dropout over ", n, " elements needs whole sequences of ",
              key.sequence_elements, " elements");
  const DType act = require_act_dtype(x, "dropout x");
  const uint64_t threshold = dropout_threshold(p);
  const uint64_t per_seq = static_cast<uint64_t>(key.sequence_elements);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* xp = x.as<T>();
    const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
    parallel_chunks(n, threads_, [&](int64_t begin, int64_t end) {
      // (sequence, element) of `begin`, then walked forward: one division per chunk. One Philox
      // call serves the four elements e..e+3 of a sequence with e a multiple of 4.
      uint64_t seq = static_cast<uint64_t>(begin) / per_seq;
      uint64_t e = static_cast<uint64_t>(begin) - seq * per_seq;
      std::array<uint32_t, 4> words{};
      for (int64_t i = begin; i < end; ++i) {
        if (i == begin || e == 0 || (e & 3) == 0)
          words = dropout_words(key.seed, key.site, key.first_sequence + seq, e);
        xp[i] = words[e & 3] >= threshold ? xp[i] * keep_scale : T(0);
        if (++e == per_seq) {
          e = 0;
          ++seq;
        }
      }
    });
  });
}

}  // namespace ledgerlm::cpu
