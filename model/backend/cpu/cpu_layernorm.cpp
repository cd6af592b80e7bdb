// LayerNorm over the last dimension (eps 1e-5), forward (alone, or fused with the residual add
// before it) and backward.
//
// Forward uses two passes per row (mean, then the centred variance) for accuracy, and saves
// mean and rstd in the activation dtype. Backward accumulates into dx (the residual stream's
// gradient) and into dweight/dbias; the parameter gradients are reduced over a fixed partition
// of the rows into `threads` chunks whose partials are summed in chunk order (deterministic for
// a given thread count). Weights in bf16/fp16 are widened once per call into workspace. The row
// loops (cpu_layernorm_rows.h) are compiled per path: fp32 runs the backend's kernel table,
// fp64 the instantiation here.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/common/op_constants.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

#include "model/backend/cpu/cpu_layernorm_rows.h"

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

// Returns weight widened to T: the tensor itself when already T, else a copy in `w`.
template <class T>
const T* widen_param(Tensor t, int64_t n, T* w) {
  if (t.dtype == (std::is_same_v<T, double> ? DType::kF64 : DType::kF32)) return t.as<const T>();
  row_load(t, 0, n, w);
  return w;
}

}  // namespace

void CpuBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                                   Tensor bias, int64_t rows, int64_t channels) {
  layernorm_forward_impl(Tensor(), Tensor(), out, mean, rstd, x, weight, bias, rows, channels);
}

void CpuBackend::add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd, Tensor a,
                                       Tensor b, Tensor weight, Tensor bias, int64_t rows,
                                       int64_t channels) {
  const DType act = require_act_dtype(a, "add_layernorm_forward a");
  require_act(b, act, "add_layernorm_forward b");
  layernorm_forward_impl(a, b, out, mean, rstd, sum, weight, bias, rows, channels);
}

// x normalised into out; with a and b (the fused residual add) x = a + b is written first, row
// by row, inside the same pass.
void CpuBackend::layernorm_forward_impl(Tensor a, Tensor b, Tensor out, Tensor mean, Tensor rstd,
                                        Tensor x, Tensor weight, Tensor bias, int64_t rows,
                                        int64_t channels) {
  const DType act = require_act_dtype(x, "layernorm_forward x");
  require_act(out, act, "layernorm_forward out");
  require_act(mean, act, "layernorm_forward mean");
  require_act(rstd, act, "layernorm_forward rstd");
  require_float(weight, "layernorm_forward weight");
  require_float(bias, "layernorm_forward bias");
  LLM_REQUIRE(rows >= 0 && channels > 0, "cpu backend: layernorm sizes must be rows >= 0, C > 0");
  const bool fused = !a.empty();
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* params = static_cast<T*>(workspace(WorkSlot::kParams, 2 * channels * sizeof(T)));
    const T* w = widen_param(weight, channels, params);
    const T* bb = widen_param(bias, channels, params + channels);
    T* xp = x.as<T>();
    const T* ap = fused ? a.as<const T>() : nullptr;
    const T* bp = fused ? b.as<const T>() : nullptr;
    T* op = out.as<T>();
    T* mp = mean.as<T>();
    T* rp = rstd.as<T>();
    const int64_t c = channels;
    // Rows are independent: any partition gives the same result.
    const int64_t chunks = rows * c > kParallelMin ? std::min<int64_t>(threads_, rows) : 1;
    const CpuKernels& kern = *kernels_;
    parallel_row_ranges(rows, chunks, threads_, chunks > 1,
                        [&](int64_t, int64_t begin, int64_t end) {
                          if constexpr (std::is_same_v<T, float>) {
                            LayerNormRows lr;
                            lr.begin = begin, lr.end = end, lr.c = c;
                            lr.x = xp, lr.add_a = ap, lr.add_b = bp, lr.sum = xp;
                            lr.w = w, lr.b = bb, lr.out = op, lr.mean = mp, lr.rstd = rp;
                            kern.layernorm_forward(lr);
                          } else {
                            ln_forward_rows<T>(op, mp, rp, xp, ap, bp, w, bb, begin, end, c,
                                               static_cast<T>(kLayerNormEps));
                          }
                        });
  });
}

void CpuBackend::layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                                    Tensor weight, Tensor mean, Tensor rstd, int64_t rows,
                                    int64_t channels) {
  const DType act = require_act_dtype(x, "layernorm_backward x");
  require_act(dx, act, "layernorm_backward dx");
  require_act(dout, act, "layernorm_backward dout");
  require_act(mean, act, "layernorm_backward mean");
  require_act(rstd, act, "layernorm_backward rstd");
  require_float(weight, "layernorm_backward weight");
  require_float(dweight, "layernorm_backward dweight");
  require_float(dbias, "layernorm_backward dbias");
  LLM_REQUIRE(rows >= 0 && channels > 0, "cpu backend: layernorm sizes must be rows >= 0, C > 0");
  if (rows == 0) return;
  const int64_t chunks = std::min<int64_t>(threads_, rows);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    const int64_t c = channels;
    T* params = static_cast<T*>(workspace(WorkSlot::kParams, c * sizeof(T)));
    const T* w = widen_param(weight, c, params);
    // Per chunk: dweight partial [C] then dbias partial [C].
    T* partial = static_cast<T*>(
        workspace(WorkSlot::kPartials, static_cast<size_t>(chunks * 2 * c) * sizeof(T)));
    const T* xp = x.as<const T>();
    const T* dop = dout.as<const T>();
    const T* mp = mean.as<const T>();
    const T* rp = rstd.as<const T>();
    T* dxp = dx.as<T>();
    const CpuKernels& kern = *kernels_;
    parallel_row_ranges(rows, chunks, threads_, rows * c > kParallelMin,
                        [&](int64_t ch, int64_t begin, int64_t end) {
                          T* dw = partial + ch * 2 * c;
                          T* db = dw + c;
                          for (int64_t i = 0; i < c; ++i) dw[i] = db[i] = T(0);
                          if constexpr (std::is_same_v<T, float>) {
                            LayerNormRows lr;
                            lr.begin = begin, lr.end = end, lr.c = c;
                            lr.x = xp, lr.w = w, lr.mean = const_cast<float*>(mp),
                            lr.rstd = const_cast<float*>(rp);
                            lr.dout = dop, lr.dx = dxp, lr.dw = dw, lr.db = db;
                            kern.layernorm_backward(lr);
                          } else {
                            ln_backward_rows<T>(dxp, dw, db, dop, xp, w, mp, rp, begin, end, c);
                          }
                        });
    sum_chunk_partials(partial, chunks, 2 * c, 2 * c);
    row_accumulate(dweight, 0, c, partial);
    row_accumulate(dbias, 0, c, partial + c);
  });
}

}  // namespace ledgerlm::cpu
