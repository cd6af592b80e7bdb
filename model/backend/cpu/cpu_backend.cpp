// CPU backend construction, memory, and the whole-buffer utilities: zero, convert (with
// stochastic rounding), accumulate, sum_squares (alone or fused with a copy or accumulate: the
// gradient noise scale's fold), all_finite, scale.
//
// Buffer-wide loops are split into fixed chunks of kBufferChunk elements (op_constants.h: the
// CUDA reductions use the same chunks), independent of the thread count; the reductions sum
// per-chunk partials in chunk order, so their results do not even depend on the number of
// threads.
#include "model/backend/cpu/cpu_backend.h"

#include <omp.h>

#include <cblas.h>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "model/backend/common/op_constants.h"
#include "model/backend/common/random_keys.h"
#include "model/backend/cpu/cpu_dtype.h"
#include "model/backend/cpu/cpu_gemm_lib.h"
#include "model/backend/cpu/cpu_kernels.h"
#include "model/backend/cpu/cpu_onednn.h"
#include "model/backend/cpu/cpu_optim.h"
#include "model/backend/cpu/cpu_subnormals.h"
#include "model/backend/mixed_float.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace cpu {
namespace {

int64_t chunk_count(int64_t n) {
  return (n + kBufferChunk - 1) / kBufferChunk;
}

// Sum of squares of one chunk in double, vectorised. Never inlined: sum_squares and
// sum_squares_fold run this one compiled loop, so their lanes add in the same order and the two
// return bitwise the same value.
template <class S>
[[gnu::noinline]] double chunk_sum_squares(const S* p, int64_t len) {
  double acc = 0.0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < len; ++i) {
    const double v = static_cast<double>(load_value(p[i]));
    acc += v * v;
  }
  return acc;
}

// The fp32 <-> bf16/fp16 conversions on the kernel table (bitwise the scalar ones); false for
// other dtype pairs.
template <class D, class S>
inline bool convert_fast(const CpuKernels& k, D* d, const S* s, int64_t n) {
  if constexpr (std::is_same_v<D, float> && std::is_same_v<S, Bf16>) {
    k.bf16_to_f32(d, reinterpret_cast<const uint16_t*>(s), n);
  } else if constexpr (std::is_same_v<D, Bf16> && std::is_same_v<S, float>) {
    k.f32_to_bf16(reinterpret_cast<uint16_t*>(d), s, n);
  } else if constexpr (std::is_same_v<D, float> && std::is_same_v<S, Half>) {
    k.f16_to_f32(d, reinterpret_cast<const uint16_t*>(s), n);
  } else if constexpr (std::is_same_v<D, Half> && std::is_same_v<S, float>) {
    k.f32_to_f16(reinterpret_cast<uint16_t*>(d), s, n);
  } else {
    return false;
  }
  return true;
}

}  // namespace

CpuBackend::CpuBackend(int threads, CpuIsa isa)
    : threads_(threads > 0 ? threads : omp_get_num_procs()),
      isa_(isa),
      kernels_(&cpu_kernels(isa)) {
  cpu_gemm_lib_init(isa);
  // The num_threads clauses in the kernels pin their regions to threads_; setting the defaults
  // too keeps OpenBLAS (OpenMP build) and any caller code in step with it.
  omp_set_num_threads(threads_);
  openblas_set_num_threads(threads_);
  // Before any op: the pool's threads (and the caller) take precision.subnormals' mode.
  cpu_subnormals_apply(threads_);
}

CpuBackend::~CpuBackend() = default;

OneDnnMatmuls& CpuBackend::onednn() {
  if (!onednn_) onednn_ = std::make_unique<OneDnnMatmuls>();
  return *onednn_;
}

Buffer CpuBackend::allocate(MemTag tag, size_t bytes) {
  return Buffer(&tracker_, tag, bytes);
}

// The CPU backend's memory is host memory: its copies are memcpy (parallel for large ones).
void CpuBackend::copy_from_host(Tensor dst, const void* src, int64_t n) {
  note_up(n * static_cast<int64_t>(dtype_size(dst.dtype)));
  copy(dst, Tensor(const_cast<void*>(src), dst.dtype), n);
}

void CpuBackend::copy_to_host(void* dst, Tensor src, int64_t n) {
  note_down(n * static_cast<int64_t>(dtype_size(src.dtype)));
  copy(Tensor(dst, src.dtype), src, n);
}

void CpuBackend::copy(Tensor dst, Tensor src, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(dst.data != nullptr && src.data != nullptr, "cpu backend: copy of a null tensor");
  LLM_REQUIRE(dst.dtype == src.dtype, "cpu backend: copy from ", dtype_name(src.dtype), " to ",
              dtype_name(dst.dtype), " (use convert to change the dtype)");
  const int64_t bytes = n * static_cast<int64_t>(dtype_size(dst.dtype));
  const int64_t piece = kBufferChunk * 4;
  const int64_t pieces = (bytes + piece - 1) / piece;
  char* d = static_cast<char*>(dst.data);
  const char* s = static_cast<const char*>(src.data);
#pragma omp parallel for schedule(static) num_threads(threads_) if (pieces > 1)
  for (int64_t c = 0; c < pieces; ++c) {
    const int64_t begin = c * piece;
    std::memmove(d + begin, s + begin, static_cast<size_t>(std::min(bytes - begin, piece)));
  }
}

// Elements per piece of an element-wise optimizer pass: 64 KiB of each fp32 tensor.
constexpr int64_t kOptimPiece = 1 << 14;

void CpuBackend::optimizer_ops(const OptimOp* ops, int64_t count) {
  // Every tensor's pieces in one parallel region: the small tensors (biases, norms) do not pay
  // a region each, and each piece runs serially in this path's vector loops.
  optim_pieces_.clear();
  int64_t total = 0;
  for (int64_t i = 0; i < count; ++i) {
    LLM_REQUIRE(optim_op_elementwise(ops[i].kind),
                "cpu backend: optimizer_ops takes element-wise kernels only (kind ",
                static_cast<int>(ops[i].kind), ")");
    cpu_optimizer_check(ops[i]);
    for (int64_t b = 0; b < ops[i].n; b += kOptimPiece)
      optim_pieces_.push_back({i, b, std::min(kOptimPiece, ops[i].n - b)});
    total += ops[i].n;
  }
  void (*const piece)(const OptimOp&) =
      isa_ == CpuIsa::kPortable ? cpu_optimizer_piece : cpu_optimizer_piece_avx2;
  const int64_t pieces = static_cast<int64_t>(optim_pieces_.size());
#pragma omp parallel for schedule(static) num_threads(threads_) if (total >= kOptimParallelMin)
  for (int64_t p = 0; p < pieces; ++p) {
    const OptimPiece& pc = optim_pieces_[static_cast<size_t>(p)];
    piece(optim_op_slice(ops[pc.op], pc.begin, pc.count));
  }
}

void CpuBackend::optimizer_op(const OptimOp& op, double* sums) {
  if (optim_op_elementwise(op.kind)) return optimizer_ops(&op, 1);
  cpu_optimizer_op(op, sums);
  if (optim_op_reduces(op.kind)) note_down(2 * sizeof(double));
  // Adafactor's factored statistics live in host memory (optim_op.h): a device backend moves
  // them, so they are counted here as it would move them — the row and column accumulators
  // down after the sums, the row fractions and column statistics up before U^2 and the update.
  const int64_t stats = optim_op_host_stats(op);
  if (op.kind == OptimOpKind::kAdafactorFactoredSums)
    note_down(stats * static_cast<int64_t>(sizeof(double)));
  else if (op.kind == OptimOpKind::kAdafactorFactoredU2 ||
           op.kind == OptimOpKind::kAdafactorApplyFactored)
    note_up(stats * static_cast<int64_t>(sizeof(float)));
}

void* CpuBackend::workspace(WorkSlot slot, size_t bytes) {
  Buffer& buf = work_[static_cast<size_t>(slot)];
  if (buf.bytes() < bytes) {
    buf.reset();  // free first so the peak never counts the old and the new buffer together
    buf = Buffer(&tracker_, MemTag::kWorkspace, (bytes + 4095) / 4096 * 4096);
  }
  return buf.data();
}

void CpuBackend::zero(Tensor t, int64_t n) {
  if (n <= 0) return;
  LLM_REQUIRE(t.data != nullptr, "cpu backend: zero() on a null tensor");
  const int64_t bytes = n * static_cast<int64_t>(dtype_size(t.dtype));
  const int64_t chunks = (bytes + kBufferChunk * 4 - 1) / (kBufferChunk * 4);
  char* p = static_cast<char*>(t.data);
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * kBufferChunk * 4;
    std::memset(p + begin, 0, static_cast<size_t>(std::min(bytes - begin, kBufferChunk * 4)));
  }
}

void CpuBackend::convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
                         uint64_t stream_offset) {
  if (n <= 0) return;
  require_float(dst, "convert dst");
  require_float(src, "convert src");
  const int64_t chunks = chunk_count(n);
  if (dst.dtype == src.dtype) {
    const int64_t elem = static_cast<int64_t>(dtype_size(dst.dtype));
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk;
      std::memcpy(static_cast<char*>(dst.data) + begin * elem,
                  static_cast<const char*>(src.data) + begin * elem,
                  static_cast<size_t>(std::min(n - begin, kBufferChunk) * elem));
    }
    return;
  }
  const bool stochastic = rounds_stochastically(rounding, dst.dtype);
  dispatch_float_pair(dst.dtype, src.dtype, [&](auto dtag, auto stag) {
    using D = decltype(dtag);
    using S = decltype(stag);
    D* d = dst.as<D>();
    const S* s = src.as<const S>();
    const CpuKernels& kern = *kernels_;
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk, end = std::min(n, begin + kBufferChunk);
      if (!stochastic) {
        if (!convert_fast(kern, d + begin, s + begin, end - begin)) {
          for (int64_t i = begin; i < end; ++i) store_value(d[i], load_value(s[i]));
        }
        continue;
      }
      std::array<uint32_t, 4> words{};
      for (int64_t i = begin; i < end; ++i) {
        const uint64_t idx = stream_offset + static_cast<uint64_t>(i);
        if (i == begin || (idx & 3) == 0) words = rounding_words(seed, idx);
        store_stochastic(d[i], load_value(s[i]), words[idx & 3]);
      }
    }
  });
}

void CpuBackend::accumulate(Tensor dst, Tensor src, int64_t n) {
  if (n <= 0) return;
  require_float(dst, "accumulate dst");
  require_float(src, "accumulate src");
  const int64_t chunks = chunk_count(n);
  dispatch_float(dst.dtype, [&](auto dtag) {
    using D = decltype(dtag);
    dispatch_float(src.dtype, [&](auto stag) {
      using S = decltype(stag);
      using C = AccumulateOf<D, S>;
      D* d = dst.as<D>();
      const S* s = src.as<const S>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t begin = c * kBufferChunk, end = std::min(n, begin + kBufferChunk);
        for (int64_t i = begin; i < end; ++i) {
          store_value(d[i], static_cast<C>(load_value(d[i])) + static_cast<C>(load_value(s[i])));
        }
      }
    });
  });
}

double CpuBackend::sum(Tensor x, int64_t n) {
  note_down(sizeof(double));
  if (n <= 0) return 0.0;
  LLM_REQUIRE(x.dtype == DType::kF32 || x.dtype == DType::kF64,
              "cpu backend: sum of fp32 or fp64 values, got ", dtype_name(x.dtype));
  // Chunks of kBufferChunk in order, each summed left to right: independent of the thread count.
  const int64_t chunks = chunk_count(n);
  double* partial = static_cast<double*>(workspace(WorkSlot::kPartials, chunks * sizeof(double)));
  dispatch_act(x.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.as<const T>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk, end = std::min(n, begin + kBufferChunk);
      double acc = 0.0;
      for (int64_t i = begin; i < end; ++i) acc += static_cast<double>(p[i]);
      partial[c] = acc;
    }
  });
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

double CpuBackend::sum_squares(Tensor x, int64_t n) {
  note_down(sizeof(double));
  if (n <= 0) return 0.0;
  require_float(x, "sum_squares x");
  const int64_t chunks = chunk_count(n);
  double* partial = static_cast<double*>(workspace(WorkSlot::kPartials, chunks * sizeof(double)));
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    const S* p = x.as<const S>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk;
      partial[c] = chunk_sum_squares(p + begin, std::min(n - begin, kBufferChunk));
    }
  });
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

double CpuBackend::sum_squares_fold(Tensor x, Tensor y, int64_t n, SquaresFold fold) {
  note_down(sizeof(double));
  if (n <= 0) return 0.0;
  require_float(x, "sum_squares_fold x");
  require_float(y, "sum_squares_fold y");
  LLM_REQUIRE(x.dtype == y.dtype, "cpu backend: sum_squares_fold of one dtype, got ",
              dtype_name(x.dtype), " and ", dtype_name(y.dtype));
  const int64_t chunks = chunk_count(n);
  double* partial = static_cast<double*>(workspace(WorkSlot::kPartials, chunks * sizeof(double)));
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    using C = std::conditional_t<std::is_same_v<S, double>, double, float>;  // as accumulate's
    S* px = x.as<S>();
    S* py = y.as<S>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk, len = std::min(n - begin, kBufferChunk);
      S* cx = px + begin;
      S* cy = py + begin;
      // The chunk's squares by sum_squares' own code (the same order: the same value), then the
      // fold while the chunk (at most 256 KiB) is still in cache: memory is read once.
      partial[c] = chunk_sum_squares(static_cast<const S*>(cx), len);
      switch (fold) {
        case SquaresFold::kMove:
          std::memcpy(cy, cx, static_cast<size_t>(len) * sizeof(S));
          std::memset(cx, 0, static_cast<size_t>(len) * sizeof(S));
          break;
        case SquaresFold::kAddTo:
          for (int64_t i = 0; i < len; ++i)
            store_value(cy[i],
                        static_cast<C>(load_value(cy[i])) + static_cast<C>(load_value(cx[i])));
          std::memset(cx, 0, static_cast<size_t>(len) * sizeof(S));
          break;
        case SquaresFold::kAddFrom:
          for (int64_t i = 0; i < len; ++i)
            store_value(cx[i],
                        static_cast<C>(load_value(cx[i])) + static_cast<C>(load_value(cy[i])));
          break;
      }
    }
  });
  double total = 0.0;
  for (int64_t c = 0; c < chunks; ++c) total += partial[c];
  return total;
}

bool CpuBackend::all_finite(Tensor x, int64_t n) {
  note_down(1);
  if (n <= 0) return true;
  require_float(x, "all_finite x");
  const int64_t chunks = chunk_count(n);
  bool ok = true;
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    using C = typename ComputeOf<S>::type;
    const S* p = x.as<const S>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1) reduction(&& : ok)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk, end = std::min(n, begin + kBufferChunk);
      // v * 0 is 0 for finite v and NaN for inf/NaN; the sum stays 0 iff all are finite.
      C acc = 0;
#pragma omp simd reduction(+ : acc)
      for (int64_t i = begin; i < end; ++i) acc += static_cast<C>(load_value(p[i])) * C(0);
      ok = ok && acc == C(0);
    }
  });
  return ok;
}

void CpuBackend::scale(Tensor x, int64_t n, double s) {
  if (n <= 0) return;
  require_float(x, "scale x");
  const int64_t chunks = chunk_count(n);
  dispatch_float(x.dtype, [&](auto tag) {
    using S = decltype(tag);
    S* p = x.as<S>();
#pragma omp parallel for schedule(static) num_threads(threads_) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t begin = c * kBufferChunk, end = std::min(n, begin + kBufferChunk);
      for (int64_t i = begin; i < end; ++i) {
        store_value(p[i], static_cast<double>(load_value(p[i])) * s);
      }
    }
  });
}

std::string cpu_blas_config() {
  const char* config = openblas_get_config();
  const char* core = openblas_get_corename();
  return std::string(config ? config : "") + " | core " + (core ? core : "?");
}

std::string cpu_blas_better_coretype() {
  const char* core = openblas_get_corename();
  // A forced avx2 path caps OpenBLAS at its AVX2 kernels as well: an AVX-512 machine then runs
  // what an AVX2 CPU would.
  const char* path = std::getenv("LEDGERLM_CPU_ISA");
  if (path != nullptr && std::string(path) == "avx2")
    return core != nullptr && std::string(core) == "Haswell" ? "" : "Haswell";
  if (core == nullptr || std::string(core) != "Prescott") return "";
  if (__builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2")) return "Haswell";
  return "";
}

}  // namespace cpu

std::unique_ptr<Backend> backend_create_cpu(int threads) {
  return cpu::backend_create_cpu_isa(threads, cpu::cpu_isa_default());
}

namespace cpu {
std::unique_ptr<Backend> backend_create_cpu_isa(int threads, CpuIsa isa) {
  LLM_REQUIRE(threads >= 0, "cpu backend: threads must be >= 0 (0 = all cores), got ", threads);
  return std::make_unique<CpuBackend>(threads, isa);
}
}  // namespace cpu

}  // namespace ledgerlm
