// Elementwise activation ops: residual add, GELU (tanh approximation) forward/backward, and
// inverted dropout keyed by (seed, site, element).
//
// All loops are split into fixed chunks (results do not depend on the thread count) and written
// as plain loops gcc vectorises, except where exp and the Philox draws keep them scalar; fp32
// GELU runs the AVX-512 kernels of cpu_simd.cpp where the CPU has them.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_simd.h"

namespace ledgerlm::cpu {
namespace {

constexpr int64_t kChunk = 1 << 14;
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;

int64_t chunk_count(int64_t n) {
  return (n + kChunk - 1) / kChunk;
}

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
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* x = a.as<const T>();
    const T* y = b.as<const T>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
#pragma omp simd
      for (int64_t i = begin; i < end; ++i) o[i] = x[i] + y[i];
    }
  });
}

void CpuBackend::gelu_forward(Tensor out, Tensor x, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "gelu_forward x");
  require_act(out, act, "gelu_forward out");
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.as<T>();
    const T* xp = x.as<const T>();
    const T k = static_cast<T>(kSqrt2OverPi), cubic = static_cast<T>(kGeluCubic);
    const bool simd = std::is_same_v<T, float> && cpu_has_avx512();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      if constexpr (std::is_same_v<T, float>) {
        if (simd) {
          cpu_gelu_forward_avx512(o + begin, xp + begin, end - begin);
          continue;
        }
      }
      for (int64_t i = begin; i < end; ++i) {
        const T v = xp[i];
        const T u = k * (v + cubic * v * v * v);
        o[i] = T(0.5) * v * (T(1) + tanh_via_exp(u));
      }
    }
  });
}

void CpuBackend::gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  if (n <= 0) return;
  const DType act = require_act_dtype(x, "gelu_backward x");
  require_act(dx, act, "gelu_backward dx");
  require_act(dout, act, "gelu_backward dout");
  const int64_t chunks = chunk_count(n);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* d = dx.as<T>();
    const T* xp = x.as<const T>();
    const T* g = dout.as<const T>();
    const T k = static_cast<T>(kSqrt2OverPi), cubic = static_cast<T>(kGeluCubic);
    const bool simd = std::is_same_v<T, float> && cpu_has_avx512();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      if constexpr (std::is_same_v<T, float>) {
        if (simd) {
          cpu_gelu_backward_avx512(d + begin, xp + begin, g + begin, end - begin);
          continue;
        }
      }
      for (int64_t i = begin; i < end; ++i) {
        const T v = xp[i];
        const T th = tanh_via_exp(k * (v + cubic * v * v * v));
        const T du = k * (T(1) + T(3) * cubic * v * v);
        const T grad = T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du;
        d[i] = g[i] * grad;  // written, not accumulated (dx may alias dout)
      }
    }
  });
}

void CpuBackend::dropout(Tensor x, int64_t n, double p, uint64_t seed, uint64_t site) {
  LLM_REQUIRE(p >= 0.0 && p < 1.0, "cpu backend: dropout probability must be in [0, 1), got ", p);
  if (n <= 0 || p == 0.0) return;
  const DType act = require_act_dtype(x, "dropout x");
  const int64_t chunks = chunk_count(n);
  const uint64_t threshold = cpu_dropout_threshold(p);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* xp = x.as<T>();
    const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      // kChunk is a multiple of 4, so each Philox call serves exactly one group of 4 elements.
      for (int64_t i = begin; i < end; i += 4) {
        const auto words = rng_bits(seed, RngStream::kDropout, site, static_cast<uint64_t>(i) >> 2);
        const int64_t stop = std::min<int64_t>(end, i + 4);
        for (int64_t j = i; j < stop; ++j) {
          xp[j] = words[j - i] >= threshold ? xp[j] * keep_scale : T(0);
        }
      }
    }
  });
}

}  // namespace ledgerlm::cpu
