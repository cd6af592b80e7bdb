// The CPU ops' parallel loop skeletons, written once.
//
// parallel_chunks: an elementwise op's n elements in fixed chunks of kElementChunk, split over
// the threads. Which elements a chunk holds never depends on the thread count, so an op whose
// body is a function of its chunk's elements gives the same bits on any number of threads.
//
// parallel_rows: independent rows (a softmax row, a row of heads), one body call per row.
//
// parallel_row_ranges + sum_chunk_partials: a reduction over rows (a norm's weight gradient) in
// a fixed number of row ranges, whose partials are summed in range order.
//
// Both keep the region serial below a size where starting threads costs more than it saves,
// and run the body exactly as the loop it replaced did: the arithmetic is the body's alone.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ledgerlm::cpu {

constexpr int64_t kElementChunk = 1 << 14;

inline int64_t element_chunk_count(int64_t n) {
  return (n + kElementChunk - 1) / kElementChunk;
}

// body(begin, end) for each chunk [begin, end) of [0, n); parallel when there are two or more.
template <class Body>
void parallel_chunks(int64_t n, int threads, Body&& body) {
  const int64_t chunks = element_chunk_count(n);
#pragma omp parallel for schedule(static) num_threads(threads) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kElementChunk;
    body(begin, std::min(n, begin + kElementChunk));
  }
}

// body(r) for each row r of [0, rows); parallel when `parallel` (the caller's size threshold).
template <class Body>
void parallel_rows(int64_t rows, int threads, bool parallel, Body&& body) {
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
  for (int64_t r = 0; r < rows; ++r) body(r);
}

// body(ch, begin, end) for `chunks` fixed, contiguous row ranges of [0, rows) (chunk ch holds
// rows [rows ch / chunks, rows (ch + 1) / chunks)); parallel when `parallel`. For reductions over
// rows whose per-chunk partials are then summed in chunk order (sum_chunk_partials).
template <class Body>
void parallel_row_ranges(int64_t rows, int64_t chunks, int threads, bool parallel, Body&& body) {
#pragma omp parallel for schedule(static) num_threads(threads) if (parallel)
  for (int64_t ch = 0; ch < chunks; ++ch) body(ch, rows * ch / chunks, rows * (ch + 1) / chunks);
}

// partial[i] += partial[ch * stride + i] for ch = 1 .. chunks - 1 in that order, i < n: the
// chunks' partial sums folded into the first, deterministic for a given chunk count.
template <class T>
void sum_chunk_partials(T* partial, int64_t chunks, int64_t stride, int64_t n) {
  for (int64_t ch = 1; ch < chunks; ++ch) {
    const T* src = partial + ch * stride;
    for (int64_t i = 0; i < n; ++i) partial[i] += src[i];
  }
}

}  // namespace ledgerlm::cpu
