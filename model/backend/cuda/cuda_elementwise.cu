// Elementwise ops: residual add, GELU (tanh approximation, the CPU's formula: tanh through exp),
// inverted dropout with the CPU's counter-based mask (dropout_bits: the same Philox words,
// so the same elements are dropped), accumulate and scale.
#include <cmath>

#include "model/backend/common/op_constants.h"
#include "model/backend/common/random_keys.h"
#include "model/backend/cuda/cuda_act_checks.h"
#include "model/backend/cuda/cuda_common.cuh"
#include "model/backend/mixed_float.h"

namespace ledgerlm::cuda {
namespace {

template <class T>
__device__ inline T tanh_via_exp(T u) {
  return T(1) - T(2) / (T(1) + exp(T(2) * u));
}

template <class T>
__global__ void add_kernel(T* o, const T* a, const T* b, int64_t n) {
  LLM_GRID_STRIDE(i, n) o[i] = a[i] + b[i];
}

template <class T>
__global__ void gelu_forward_kernel(T* o, const T* x, int64_t n) {
  const T k = static_cast<T>(kGeluSqrt2OverPi), cubic = static_cast<T>(kGeluCubic);
  LLM_GRID_STRIDE(i, n) {
    const T v = x[i];
    const T u = k * (v + cubic * v * v * v);
    o[i] = T(0.5) * v * (T(1) + tanh_via_exp(u));
  }
}

template <class T>
__global__ void gelu_backward_kernel(T* d, const T* x, const T* g, int64_t n) {
  const T k = static_cast<T>(kGeluSqrt2OverPi), cubic = static_cast<T>(kGeluCubic);
  LLM_GRID_STRIDE(i, n) {
    const T v = x[i];
    const T th = tanh_via_exp(k * (v + cubic * v * v * v));
    const T du = k * (T(1) + T(3) * cubic * v * v);
    const T grad = T(0.5) * (T(1) + th) + T(0.5) * v * (T(1) - th * th) * du;
    d[i] = g[i] * grad;
  }
}

template <class T>
__global__ void dropout_kernel(T* x, int64_t n, uint64_t threshold, T keep_scale, DropoutKey key) {
  const uint64_t per_seq = static_cast<uint64_t>(key.sequence_elements);
  LLM_GRID_STRIDE(i, n) {
    const uint64_t seq = static_cast<uint64_t>(i) / per_seq;
    const uint64_t e = static_cast<uint64_t>(i) - seq * per_seq;
    const uint32_t bits = dropout_bits(key.seed, key.site, key.first_sequence + seq, e);
    x[i] = bits >= threshold ? x[i] * keep_scale : T(0);
  }
}

template <class D, class S, class C>
__global__ void accumulate_kernel(D* d, const S* s, int64_t n) {
  LLM_GRID_STRIDE(i, n) {
    store_value(d[i], static_cast<C>(load_value(d[i])) + static_cast<C>(load_value(s[i])));
  }
}

template <class S>
__global__ void scale_kernel(S* p, int64_t n, double s) {
  LLM_GRID_STRIDE(i, n) store_value(p[i], static_cast<double>(load_value(p[i])) * s);
}

}  // namespace

void CudaBackend::add(Tensor out, Tensor a, Tensor b, int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(a, "add a");
  same_act(b, act, "add b");
  same_act(out, act, "add out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    add_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream_>>>(out.as<T>(), a.as<const T>(), b.as<const T>(), n);
  });
  launch_check("add");
}

void CudaBackend::gelu_forward(Tensor out, Tensor x, int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(x, "gelu_forward x");
  same_act(out, act, "gelu_forward out");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    gelu_forward_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream_>>>(out.as<T>(), x.as<const T>(), n);
  });
  launch_check("gelu_forward");
}

void CudaBackend::gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  if (n <= 0) return;
  const DType act = act_of(x, "gelu_backward x");
  same_act(dx, act, "gelu_backward dx");
  same_act(dout, act, "gelu_backward dout");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    gelu_backward_kernel<T><<<blocks_for(n), kThreads, 0, stream_>>>(dx.as<T>(), x.as<const T>(),
                                                                     dout.as<const T>(), n);
  });
  launch_check("gelu_backward");
}

void CudaBackend::dropout(Tensor x, int64_t n, double p, const DropoutKey& key) {
  LLM_REQUIRE(p >= 0.0 && p < 1.0, "cuda backend: dropout probability must be in [0, 1), got ", p);
  if (n <= 0 || p == 0.0) return;
  LLM_REQUIRE(key.sequence_elements > 0 && n % key.sequence_elements == 0,
              "cuda backend: dropout over ", n, " elements needs whole sequences of ",
              key.sequence_elements, " elements");
  const DType act = act_of(x, "dropout x");
  const uint64_t threshold = dropout_threshold(p);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    const T keep_scale = static_cast<T>(1.0 / (1.0 - p));
    dropout_kernel<T>
        <<<blocks_for(n), kThreads, 0, stream_>>>(x.as<T>(), n, threshold, keep_scale, key);
  });
  launch_check("dropout");
}

void CudaBackend::accumulate(Tensor dst, Tensor src, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(dst.data && src.data && dtype_is_float(dst.dtype) && dtype_is_float(src.dtype),
              "cuda backend: accumulate needs float tensors");
  dispatch_float(dst.dtype, [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_float(src.dtype, [&](auto stag) {
      using S = decltype(stag);
      using C = AccumulateOf<D, S>;
      accumulate_kernel<D, S, C>
          <<<blocks_for(n), kThreads, 0, stream_>>>(dst.as<D>(), src.as<const S>(), n);
    });
  });
  launch_check("accumulate");
}

void CudaBackend::scale(Tensor x, int64_t n, double s) {
  if (n <= 0) return;
  LLM_REQUIRE(x.data && dtype_is_float(x.dtype), "cuda backend: scale needs a float tensor");
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    scale_kernel<S><<<blocks_for(n), kThreads, 0, stream_>>>(x.as<S>(), n, s);
  });
  launch_check("scale");
}

}  // namespace ledgerlm::cuda
