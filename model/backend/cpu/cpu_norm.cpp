// model.norm: LayerNorm or RMSNorm over the last dimension with any eps, and with the
// learnable weight and the bias each optional (NormArgs, backend.h).
//
// LayerNorm runs the row loops of layernorm_forward/backward (cpu_layernorm_rows.h) with a
// missing weight widened to ones and a missing bias to zeros: x * 1 + 0 rounds to x, so a
// weightless LayerNorm is exactly the normalised row. RMSNorm has its own row loops
// (cpu_rmsnorm_rows.h): fp32 on the kernel table of the backend's path, fp64 here. The
// parameter gradients are reduced over a fixed partition of the rows into `threads` chunks whose
// partials are summed in chunk order, as layernorm_backward does (deterministic for a given
// thread count), and use the same workspace slots and sizes (the memory ledger's CPU scratch).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

#include "model/backend/cpu/cpu_layernorm_rows.h"
#include "model/backend/cpu/cpu_rmsnorm_rows.h"

// Below this many elements a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 16384;

// weight widened to T into `w` (ones when the norm has none), likewise bias (zeros).
template <class T>
void widen_or_fill(Tensor t, int64_t n, T* w, T fill) {
  if (t.empty()) {
    std::fill(w, w + n, fill);
    return;
  }
  row_load(t, 0, n, w);
}

void check_optional(const Tensor& t, const char* what) {
  if (!t.empty()) require_float(t, what);
}

}  // namespace

void CpuBackend::norm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                              Tensor bias, const NormArgs& args) {
  const DType act = require_act_dtype(x, "norm_forward x");
  require_act(out, act, "norm_forward out");
  require_act(rstd, act, "norm_forward rstd");
  if (!args.rms) require_act(mean, act, "norm_forward mean");
  check_optional(weight, "norm_forward weight");
  check_optional(bias, "norm_forward bias");
  LLM_REQUIRE(!args.rms || bias.empty(), "cpu backend: norm_forward: RMSNorm takes no bias");
  const int64_t rows = args.rows, c = args.channels;
  LLM_REQUIRE(rows >= 0 && c > 0, "cpu backend: norm sizes must be rows >= 0, C > 0");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* params = static_cast<T*>(workspace(WorkSlot::kParams, 2 * c * sizeof(T)));
    widen_or_fill(weight, c, params, T(1));
    if (!args.rms) widen_or_fill(bias, c, params + c, T(0));
    const T* w = args.rms && weight.empty() ? nullptr : params;
    const T* b = params + c;
    T* xp = x.as<T>();
    T* op = out.as<T>();
    T* mp = args.rms ? nullptr : mean.as<T>();
    T* rp = rstd.as<T>();
    const T eps = static_cast<T>(args.eps);
    const bool rms = args.rms;
    const int64_t chunks = rows * c > kParallelMin ? std::min<int64_t>(threads_, rows) : 1;
    const CpuKernels& kern = *kernels_;
    parallel_row_ranges(
        rows, chunks, threads_, chunks > 1, [&](int64_t, int64_t begin, int64_t end) {
          if (!rms)
            ln_forward_rows<T>(op, mp, rp, xp, nullptr, nullptr, w, b, begin, end, c, eps);
          else if constexpr (std::is_same_v<T, float>)
            kern.rmsnorm_forward(op, rp, xp, w, begin, end, c, eps);
          else
            rms_forward_rows<T>(op, rp, xp, w, begin, end, c, eps);
        });
  });
}

void CpuBackend::norm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                               Tensor weight, Tensor mean, Tensor rstd, const NormArgs& args) {
  const DType act = require_act_dtype(x, "norm_backward x");
  require_act(dx, act, "norm_backward dx");
  require_act(dout, act, "norm_backward dout");
  require_act(rstd, act, "norm_backward rstd");
  if (!args.rms) require_act(mean, act, "norm_backward mean");
  check_optional(weight, "norm_backward weight");
  check_optional(dweight, "norm_backward dweight");
  check_optional(dbias, "norm_backward dbias");
  LLM_REQUIRE(!args.rms || dbias.empty(), "cpu backend: norm_backward: RMSNorm takes no bias");
  const int64_t rows = args.rows, c = args.channels;
  LLM_REQUIRE(rows >= 0 && c > 0, "cpu backend: norm sizes must be rows >= 0, C > 0");
  if (rows == 0) return;
  const int64_t chunks = std::min<int64_t>(threads_, rows);
  const bool rms = args.rms, want_w = !dweight.empty(), want_b = !dbias.empty();
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    T* params = static_cast<T*>(workspace(WorkSlot::kParams, c * sizeof(T)));
    widen_or_fill(weight, c, params, T(1));
    const T* w = params;
    // Per chunk: dweight partial [C] then dbias partial [C] (LayerNorm's loops always sum both).
    T* partial = static_cast<T*>(
        workspace(WorkSlot::kPartials, static_cast<size_t>(chunks * 2 * c) * sizeof(T)));
    const T* xp = x.as<const T>();
    const T* dop = dout.as<const T>();
    const T* mp = rms ? nullptr : mean.as<const T>();
    const T* rp = rstd.as<const T>();
    T* dxp = dx.as<T>();
    const CpuKernels& kern = *kernels_;
    parallel_row_ranges(rows, chunks, threads_, rows * c > kParallelMin,
                        [&](int64_t ch, int64_t begin, int64_t end) {
                          T* dw = partial + ch * 2 * c;
                          T* db = dw + c;
                          for (int64_t i = 0; i < 2 * c; ++i) dw[i] = T(0);
                          T* dw_or_null = want_w ? dw : nullptr;
                          if (!rms)
                            ln_backward_rows<T>(dxp, dw, db, dop, xp, w, mp, rp, begin, end, c);
                          else if constexpr (std::is_same_v<T, float>)
                            kern.rmsnorm_backward(dxp, dw_or_null, dop, xp, w, rp, begin, end, c);
                          else
                            rms_backward_rows<T>(dxp, dw_or_null, dop, xp, w, rp, begin, end, c);
                        });
    sum_chunk_partials(partial, chunks, 2 * c, 2 * c);
    if (want_w) row_accumulate(dweight, 0, c, partial);
    if (want_b) row_accumulate(dbias, 0, c, partial + c);
  });
}

}  // namespace ledgerlm::cpu
