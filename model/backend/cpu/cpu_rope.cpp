// Rotary position embedding on the CPU (Backend::rope: Hugging Face Llama's half-split pairs).
//
// The angles depend on the position alone, and a batch of B sequences repeats each of its
// `seq` positions B times: the work runs position by position (in parallel), computing each
// position's hd/2 angles once (pos * theta^(-2i/hd), cos and sin in double, rounded once to the
// activation dtype) and rotating every head of every row at that position with them. So the
// cost is min(rows, seq) x hd/2 sin/cos pairs per call, not rows x hd/2, and theta^(-2i/hd) is
// computed once per pair per call; no table is kept between calls (nothing for the memory
// ledger to hold). Every row gets exactly the values it would get alone: results do not depend
// on the thread count or on how a batch is split.
#include <algorithm>
#include <cmath>

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_parallel.h"

namespace ledgerlm::cpu {
namespace {

// Pairs whose frequencies and angles one pass keeps on the stack.
constexpr int64_t kPairChunk = 64;

template <class T>
void rope_rows(T* x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads, int64_t hd,
               int64_t stride, double theta, bool inverse, int threads) {
  const int64_t half = hd / 2;
  const double sign = inverse ? -1.0 : 1.0;
  // Row r has position pos0 + r % seq: the rows of position p are p, p + seq, p + 2 seq, ...
  const int64_t positions = std::min(rows, seq);
  const bool parallel = rows * heads * hd > 16384;
  for (int64_t i0 = 0; i0 < half; i0 += kPairChunk) {
    const int64_t n = std::min(kPairChunk, half - i0);
    double inv_freq[kPairChunk];
    for (int64_t i = 0; i < n; ++i)
      inv_freq[i] = std::pow(theta, -2.0 * static_cast<double>(i0 + i) / static_cast<double>(hd));
    parallel_rows(positions, threads, parallel, [&](int64_t p) {
      const double pos = static_cast<double>(pos0 + p);
      T cs[kPairChunk], sn[kPairChunk];
      for (int64_t i = 0; i < n; ++i) {
        const double angle = pos * inv_freq[i];
        cs[i] = static_cast<T>(std::cos(angle));
        sn[i] = static_cast<T>(sign * std::sin(angle));
      }
      for (int64_t r = p; r < rows; r += seq) {
        T* row = x + r * stride;
        for (int64_t h = 0; h < heads; ++h) {
          T* a = row + h * hd + i0;
          T* b = a + half;
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) {
            const T ai = a[i], bi = b[i];
            a[i] = ai * cs[i] - bi * sn[i];
            b[i] = bi * cs[i] + ai * sn[i];
          }
        }
      }
    });
  }
}

}  // namespace

void CpuBackend::rope(Tensor x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads,
                      int64_t head_dim, int64_t stride, double theta, bool inverse) {
  if (rows <= 0) return;
  const DType act = require_act_dtype(x, "rope x");
  LLM_REQUIRE(seq > 0 && pos0 >= 0 && heads > 0 && head_dim > 0 && head_dim % 2 == 0 &&
                  stride >= heads * head_dim && theta > 0.0,
              "cpu backend: rope needs seq > 0, pos0 >= 0, an even head_dim and stride >= heads x "
              "head_dim");
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    rope_rows<T>(x.as<T>(), rows, seq, pos0, heads, head_dim, stride, theta, inverse, threads_);
  });
}

}  // namespace ledgerlm::cpu
