// Token + position embedding, forward and backward.
//
// Backward is deterministic without atomics and independent of the thread count:
// - dwpe: each position t sums its B rows in batch order, then adds once into dwpe[t].
// - dwte: positions are grouped by token (sorted on (token, position), so in position order); each
//   distinct token sums its rows in that order and adds once into dwte[token]. Different tokens
//   touch different rows, so groups run in parallel; a bf16 gradient is rounded once per token
//   and step instead of once per occurrence.
#include <omp.h>

#include <algorithm>
#include <type_traits>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_kernels.h"

namespace ledgerlm::cpu {
namespace {

const int32_t* token_array(Tensor t, const char* what) {
  LLM_REQUIRE(t.empty() || t.dtype == DType::kI32, "cpu backend: ", what,
              " tokens must be int32, got ", dtype_name(t.dtype));
  return t.as<const int32_t>();
}

void require_tokens(const int32_t* tokens, int64_t count, const char* what) {
  LLM_REQUIRE(tokens != nullptr || count == 0, "cpu backend: ", what, " tokens are null");
  bool ok = true;
  for (int64_t i = 0; i < count; ++i) ok = ok && tokens[i] >= 0;
  LLM_REQUIRE(ok, "cpu backend: ", what, ": token ids must be >= 0");
}

// dst[i] = src[i] widened to fp32 (the path's vector casts for 16-bit rows).
template <class S>
void widen_row(const CpuKernels& k, const S* src, int64_t n, float* dst) {
  if constexpr (std::is_same_v<S, Bf16>) {
    k.bf16_to_f32(dst, reinterpret_cast<const uint16_t*>(src), n);
  } else if constexpr (std::is_same_v<S, Half>) {
    k.f16_to_f32(dst, reinterpret_cast<const uint16_t*>(src), n);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
  }
}

}  // namespace

void CpuBackend::embedding_forward(Tensor out, Tensor token_ids, Tensor wte, Tensor wpe,
                                   int64_t batch, int64_t seq, int64_t channels) {
  const DType act = require_act_dtype(out, "embedding_forward out");
  require_float(wte, "embedding_forward wte");
  // No position table (model.position = rope): out = wte rows. Dispatched as wte's dtype.
  const bool no_wpe = wpe.empty();
  if (no_wpe) wpe = Tensor(nullptr, wte.dtype);
  if (!no_wpe) require_float(wpe, "embedding_forward wpe");
  LLM_REQUIRE(batch >= 0 && seq >= 0 && channels > 0, "cpu backend: embedding sizes invalid");
  const int64_t rows = batch * seq;
  const int32_t* tokens = token_array(token_ids, "embedding_forward");
  require_tokens(tokens, rows, "embedding_forward");
  const int64_t c = channels;
  dispatch_act(act, [&](auto atag) {
    using T = decltype(atag);
    dispatch_float(wte.dtype, [&](auto etag) {
      using E = decltype(etag);
      dispatch_float(wpe.dtype, [&](auto ptag) {
        using P = decltype(ptag);
        T* o = out.as<T>();
        const E* te = wte.as<const E>();
        const P* pe = wpe.as<const P>();
        // fp32 rows from 16-bit tables: both rows widened by the path's cast kernels (one row of
        // wpe per thread in workspace), then added; bitwise the scalar loop's values.
        constexpr bool kWiden =
            std::is_same_v<T, float> &&
            (!std::is_same_v<E, float> || !std::is_same_v<P, float>)&&!std::is_same_v<E, double> &&
            !std::is_same_v<P, double>;
        float* prow_all =
            kWiden ? static_cast<float*>(workspace(
                         WorkSlot::kPerThread, static_cast<size_t>(threads_ * c) * sizeof(float)))
                   : nullptr;
        const CpuKernels& kern = *kernels_;
#pragma omp parallel for schedule(static) num_threads(threads_) if (rows * c > 32768)
        for (int64_t r = 0; r < rows; ++r) {
          const E* trow = te + static_cast<int64_t>(tokens[r]) * c;
          T* orow = o + r * c;
          if (no_wpe) {
            if constexpr (kWiden) {
              widen_row(kern, trow, c, orow);
            } else {
              for (int64_t i = 0; i < c; ++i) orow[i] = static_cast<T>(load_value(trow[i]));
            }
            continue;
          }
          const P* prow = pe + (r % seq) * c;
          if constexpr (kWiden) {
            float* pw = prow_all + omp_get_thread_num() * c;
            widen_row(kern, trow, c, orow);
            widen_row(kern, prow, c, pw);
#pragma omp simd
            for (int64_t i = 0; i < c; ++i) orow[i] += pw[i];
          } else {
            for (int64_t i = 0; i < c; ++i) {
              orow[i] = static_cast<T>(load_value(trow[i])) + static_cast<T>(load_value(prow[i]));
            }
          }
        }
      });
    });
  });
}

void CpuBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor token_ids,
                                    int64_t batch, int64_t seq, int64_t channels) {
  const DType act = require_act_dtype(dout, "embedding_backward dout");
  require_float(dwte, "embedding_backward dwte");
  const bool no_wpe = dwpe.empty();  // model.position = rope: no position table
  if (!no_wpe) require_float(dwpe, "embedding_backward dwpe");
  LLM_REQUIRE(batch >= 0 && seq >= 0 && channels > 0, "cpu backend: embedding sizes invalid");
  const int64_t rows = batch * seq;
  if (rows == 0) return;
  const int32_t* tokens = token_array(token_ids, "embedding_backward");
  require_tokens(tokens, rows, "embedding_backward");
  const int64_t c = channels;

  // Positions sorted by (token, position); group g covers order[starts[g] .. starts[g+1]).
  int64_t* order =
      static_cast<int64_t*>(workspace(WorkSlot::kIndex, static_cast<size_t>(2 * rows + 1) * 8));
  int64_t* starts = order + rows;
  for (int64_t r = 0; r < rows; ++r) order[r] = r;
  // Ties broken by position: the order of a stable sort, without its temporary buffer (no heap
  // allocation per step).
  std::sort(order, order + rows, [&](int64_t a, int64_t b) {
    return tokens[a] < tokens[b] || (tokens[a] == tokens[b] && a < b);
  });
  int64_t groups = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (r == 0 || tokens[order[r]] != tokens[order[r - 1]]) starts[groups++] = r;
  }
  starts[groups] = rows;

  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    const T* d = dout.as<const T>();
    T* acc_all = static_cast<T*>(
        workspace(WorkSlot::kPerThread, static_cast<size_t>(threads_ * c) * sizeof(T)));
#pragma omp parallel num_threads(threads_) if (rows * c > 16384)
    {
      T* acc = acc_all + omp_get_thread_num() * c;
#pragma omp for schedule(static)
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t i = 0; i < c; ++i) acc[i] = T(0);
        for (int64_t k = starts[g]; k < starts[g + 1]; ++k) {
          const T* row = d + order[k] * c;
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) acc[i] += row[i];
        }
        row_accumulate(dwte, static_cast<int64_t>(tokens[order[starts[g]]]) * c, c, acc);
      }
#pragma omp for schedule(static)
      for (int64_t t = 0; t < (no_wpe ? 0 : seq); ++t) {
        for (int64_t i = 0; i < c; ++i) acc[i] = T(0);
        for (int64_t b = 0; b < batch; ++b) {
          const T* row = d + (b * seq + t) * c;
#pragma omp simd
          for (int64_t i = 0; i < c; ++i) acc[i] += row[i];
        }
        row_accumulate(dwpe, t * c, c, acc);
      }
    }
  });
}

}  // namespace ledgerlm::cpu
