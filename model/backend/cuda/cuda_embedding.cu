// Token + position embedding, forward and backward.
//
// Backward is deterministic without atomics and sums in the CPU's order:
// - dwte: the (token, position) pairs are sorted by token with a stable radix sort (CUB), so
//   each token's positions stay in position order; the first sorted entry of each token's run
//   starts a block that sums the run's rows in that order and adds once into dwte[token] (the
//   CPU's grouping: a bf16 gradient is rounded once per token and step).
// - dwpe: one thread per (position, channel) sums the batch rows in batch order.
// Distinct tokens touch distinct rows of dwte, so no two blocks write the same element.
// Token ids are not range-checked on the device (they are not visible to the host here); the
// data pipeline validates them against the vocabulary when it loads shards.
#include <cub/device/device_radix_sort.cuh>

#include "model/backend/cuda/cuda_common.cuh"

namespace ledgerlm::cuda {
namespace {

template <class T, class E, class P>
__global__ void embedding_forward_kernel(T* out, const int32_t* tokens, const E* wte, const P* wpe,
                                         int64_t rows, int64_t seq, int64_t c) {
  LLM_GRID_STRIDE(idx, rows * c) {
    const int64_t r = idx / c, i = idx - r * c;
    const int64_t t = r % seq;
    const T e = static_cast<T>(load_value(wte[static_cast<int64_t>(tokens[r]) * c + i]));
    out[idx] = wpe == nullptr ? e : e + static_cast<T>(load_value(wpe[t * c + i]));
  }
}

__global__ void iota_kernel(int32_t* v, int64_t n) {
  LLM_GRID_STRIDE(i, n) v[i] = static_cast<int32_t>(i);
}

// Block k: when sorted entry k starts a run of equal tokens, sums the run's rows into dwte.
template <class T, class S>
__global__ void dwte_kernel(S* dwte, const T* dout, const int32_t* keys, const int32_t* rows_sorted,
                            int64_t count, int64_t c) {
  using C = typename ComputeOf<S>::type;
  const int64_t k = blockIdx.x;
  const int32_t token = keys[k];
  if (k > 0 && keys[k - 1] == token) return;
  int64_t end = k + 1;
  while (end < count && keys[end] == token) ++end;
  for (int64_t i = threadIdx.x; i < c; i += blockDim.x) {
    T acc = 0;
    for (int64_t j = k; j < end; ++j) acc += dout[static_cast<int64_t>(rows_sorted[j]) * c + i];
    S& dst = dwte[static_cast<int64_t>(token) * c + i];
    store_value(dst, static_cast<C>(load_value(dst)) + static_cast<C>(acc));
  }
}

template <class T, class S>
__global__ void dwpe_kernel(S* dwpe, const T* dout, int64_t batch, int64_t seq, int64_t c) {
  using C = typename ComputeOf<S>::type;
  LLM_GRID_STRIDE(idx, seq * c) {
    const int64_t t = idx / c, i = idx - t * c;
    T acc = 0;
    for (int64_t b = 0; b < batch; ++b) acc += dout[(b * seq + t) * c + i];
    store_value(dwpe[idx], static_cast<C>(load_value(dwpe[idx])) + static_cast<C>(acc));
  }
}

}  // namespace

void CudaBackend::embedding_forward(Tensor out, Tensor token_ids, Tensor wte, Tensor wpe,
                                    int64_t batch, int64_t seq, int64_t channels) {
  LLM_REQUIRE(out.data && dtype_is_act(out.dtype), "cuda backend: embedding_forward out");
  // No position table (model.position = rope): out = wte rows.
  if (wpe.empty()) wpe = Tensor(nullptr, wte.dtype);
  LLM_REQUIRE(wte.data && dtype_is_float(wte.dtype) && dtype_is_float(wpe.dtype),
              "cuda backend: embedding_forward wte and wpe must be float tensors");
  LLM_REQUIRE(token_ids.dtype == DType::kI32, "cuda backend: embedding tokens must be int32");
  LLM_REQUIRE(batch >= 0 && seq >= 0 && channels > 0, "cuda backend: embedding sizes invalid");
  const int64_t rows = batch * seq;
  if (rows == 0) return;
  LLM_REQUIRE(token_ids.data != nullptr, "cuda backend: embedding_forward tokens are null");
  dispatch_act(out.dtype, [&](auto atag) {
    using T = decltype(atag);
    dispatch_float(wte.dtype, [&](auto etag) {
      using E = decltype(etag);
      dispatch_float(wpe.dtype, [&](auto ptag) {
        using P = decltype(ptag);
        embedding_forward_kernel<T, E, P><<<blocks_for(rows * channels), kThreads, 0, stream_>>>(
            out.as<T>(), token_ids.as<const int32_t>(), wte.as<const E>(), wpe.as<const P>(), rows,
            seq, channels);
      });
    });
  });
  launch_check("embedding_forward");
}

void CudaBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor token_ids,
                                     int64_t batch, int64_t seq, int64_t channels) {
  LLM_REQUIRE(dout.data && dtype_is_act(dout.dtype), "cuda backend: embedding_backward dout");
  const bool no_wpe = dwpe.empty();  // model.position = rope: no position table
  LLM_REQUIRE(dwte.data && dtype_is_float(dwte.dtype) && (no_wpe || dtype_is_float(dwpe.dtype)),
              "cuda backend: embedding_backward dwte and dwpe must be float tensors");
  LLM_REQUIRE(token_ids.dtype == DType::kI32, "cuda backend: embedding tokens must be int32");
  LLM_REQUIRE(batch >= 0 && seq >= 0 && channels > 0, "cuda backend: embedding sizes invalid");
  const int64_t rows = batch * seq;
  if (rows == 0) return;
  LLM_REQUIRE(rows < (int64_t{1} << 31), "cuda backend: embedding_backward rows must fit int32");
  LLM_REQUIRE(token_ids.data != nullptr, "cuda backend: embedding_backward tokens are null");
  const int n = static_cast<int>(rows);
  // Index scratch: sorted keys, positions in, positions sorted; then CUB's temporary storage.
  size_t temp_bytes = 0;
  LLM_CUDA(cub::DeviceRadixSort::SortPairs(
      nullptr, temp_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n, 0, 32, stream_));
  const size_t index_bytes = (3 * static_cast<size_t>(n) * sizeof(int32_t) + 255) / 256 * 256;
  char* scratch = static_cast<char*>(workspace(WorkSlot::kIndex, index_bytes + temp_bytes));
  int32_t* keys = reinterpret_cast<int32_t*>(scratch);
  int32_t* pos_in = keys + n;
  int32_t* pos_sorted = pos_in + n;
  iota_kernel<<<blocks_for(rows), kThreads, 0, stream_>>>(pos_in, rows);
  launch_check("embedding iota");
  LLM_CUDA(cub::DeviceRadixSort::SortPairs(scratch + index_bytes, temp_bytes,
                                           token_ids.as<const int32_t>(), keys, pos_in, pos_sorted,
                                           n, 0, 32, stream_));
  dispatch_act(dout.dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_float(dwte.dtype, [&](auto stag) {
      using S = decltype(stag);
      dwte_kernel<T, S><<<static_cast<unsigned>(n), 128, 0, stream_>>>(
          dwte.as<S>(), dout.as<const T>(), keys, pos_sorted, rows, channels);
    });
    launch_check("embedding dwte");
    if (no_wpe) return;
    dispatch_float(dwpe.dtype, [&](auto stag) {
      using S = decltype(stag);
      dwpe_kernel<T, S><<<blocks_for(seq * channels), kThreads, 0, stream_>>>(
          dwpe.as<S>(), dout.as<const T>(), batch, seq, channels);
    });
    launch_check("embedding dwpe");
  });
}

}  // namespace ledgerlm::cuda
