// Causal multi-head self-attention on the fused qkv projection, flash-style (the layout, the
// saved tensors and the backward formulas are the CPU's: see cpu_attention.cpp), and the
// KV-cache decoder's one-row attention.
//
// Grouped-query attention (args.kv_heads = KV < H): rows are [q: C | k: KV*hd | v: KV*hd] and
// query head h reads kv head h / (H / KV). Forward, D and dq are per query head as without
// grouping; dk and dv of a kv head sum over the H / KV query heads of its group, so one warp per
// (kv head, key row) walks those query heads in order, then their query rows, in its registers.
//
// A clear kernel first, not a fast one: one warp per query row (forward, dq) or key row (dk, dv).
// Forward: lane j of the warp scores key j0 + j of each 32-key tile against the row's query (kept
// in shared memory), the tile's max and sum update an online softmax, and the lanes, each owning
// head-dim columns, accumulate P V with the tile's probabilities broadcast by shuffles. Only the
// output and the log-sum-exp (of the softmax before dropout) are written.
// Backward recomputes p_ij = exp(s_ij - lse_i) and never stores P:
//   D_i = dout_i . o_i (one warp per row),
//   dq_i = scale sum_j p_ij (m_ij dout_i . v_j - D_i) k_j      (warp per query row i, keys j <= i),
//   dk_j = scale sum_i p_ij (m_ij dout_i . v_j - D_i) q_i,
//   dv_j = sum_i p_ij m_ij dout_i                              (warp per key row j, queries i >=
//   j).
// Every output element is written by one lane that sums in a fixed order (for dk and dv: the
// group's query heads in order, each over its query rows): no atomics, bitwise reproducible.
// Dropout masks m_ij come from dropout_bits with the CPU's (sequence, index) key, so forward,
// backward and the CPU drop exactly the same probabilities.
#include <cmath>

#include "model/backend/common/random_keys.h"
#include "model/backend/cuda/cuda_common.cuh"
#include "model/backend/cuda/cudnn_attention.h"

namespace ledgerlm::cuda {
namespace {

constexpr int kWarps = 4;       // query (or key) rows per block
constexpr int kMaxPerLane = 8;  // head_dim <= 256

// kv: k/v heads (= h without grouping); row: the qkv row width, c + 2 kv hd.
struct AttnDims {
  int64_t b, t, c, h, hd, kv, row;
  // Columns of query head `head`'s k and v in a qkv row (its group's kv head).
  __host__ __device__ int64_t k_col(int64_t head) const { return c + (head / (h / kv)) * hd; }
  __host__ __device__ int64_t v_col(int64_t head) const {
    return c + kv * hd + (head / (h / kv)) * hd;
  }
};

struct AttnDrop {
  bool on;
  uint64_t seed, site, first_sequence, threshold;
  double keep_scale;
};

template <class T>
__device__ inline T drop_factor(const AttnDrop& d, int64_t b, int64_t h, int64_t t, int64_t i,
                                int64_t j) {
  const uint64_t idx = static_cast<uint64_t>((h * t + i) * t + j);
  const uint32_t bits =
      dropout_bits(d.seed, d.site, d.first_sequence + static_cast<uint64_t>(b), idx);
  return bits >= d.threshold ? static_cast<T>(d.keep_scale) : T(0);
}

template <class T>
__device__ inline T dot_shared(const T* x, const T* y, int64_t n) {
  T s = 0;
  for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

// One query row's sum over a tile of 32 key rows j0 + jj <= i: acc[r] += w_jj * rows[j0 + jj][d]
// for this lane's head-dim columns d = lane + 32 r (< hd), w_jj lane jj's `w` (a shuffle), rows
// `row` apart, in ascending jj.
template <class T>
__device__ __forceinline__ void accumulate_key_tile(T (&acc)[kMaxPerLane], T w, const T* rows,
                                                    int64_t row, int64_t i, int64_t j0, int lane,
                                                    int64_t hd) {
  const int count = static_cast<int>(i - j0 + 1 < 32 ? i - j0 + 1 : 32);
  for (int jj = 0; jj < count; ++jj) {
    const T wj = __shfl_sync(0xffffffffu, w, jj);
    const T* rowp = rows + (j0 + jj) * row;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) {
      const int64_t d = lane + 32 * r;
      if (d < hd) acc[r] += wj * rowp[d];
    }
  }
}

template <class T>
__global__ void attention_forward_kernel(T* out, T* lse, const T* qkv, AttnDims s, T scale,
                                         AttnDrop drop) {
  extern __shared__ unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (gw >= s.b * s.h * s.t) return;
  const int64_t i = gw % s.t, bh = gw / s.t, b = bh / s.h, h = bh % s.h;
  const int64_t row = s.row;
  T* qs = reinterpret_cast<T*>(smem_raw) + warp * s.hd;
  const T* q = qkv + (b * s.t + i) * row + h * s.hd;
  const T* kbase = qkv + b * s.t * row + s.k_col(h);
  const T* vbase = qkv + b * s.t * row + s.v_col(h);
  for (int64_t d = lane; d < s.hd; d += 32) qs[d] = q[d];
  __syncwarp();
  T m = -INFINITY, l = 0;
  T acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = 0;
  for (int64_t j0 = 0; j0 <= i; j0 += 32) {
    const int64_t j = j0 + lane;
    const bool valid = j <= i;
    const T sc = valid ? dot_shared(qs, kbase + j * row, s.hd) * scale : T(-INFINITY);
    const T mnew = fmax(m, warp_max(sc));
    const T p = valid ? exp(sc - mnew) : T(0);
    const T corr = exp(m - mnew);
    l = l * corr + warp_sum(p);
    const T pd = (drop.on && valid) ? p * drop_factor<T>(drop, b, h, s.t, i, j) : p;
#pragma unroll
    for (int r = 0; r < kMaxPerLane; ++r) acc[r] *= corr;
    accumulate_key_tile(acc, pd, vbase, row, i, j0, lane, s.hd);
    m = mnew;
  }
  const T inv = T(1) / l;
  T* o = out + (b * s.t + i) * s.c + h * s.hd;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    if (d < s.hd) o[d] = acc[r] * inv;
  }
  if (lane == 0) lse[bh * s.t + i] = m + log(l);
}

// D[bh, i] = dout_i . o_i over the head's columns.
template <class T>
__global__ void attention_rowdot_kernel(T* dd, const T* dout, const T* out, AttnDims s) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (gw >= s.b * s.h * s.t) return;
  const int64_t i = gw % s.t, bh = gw / s.t, b = bh / s.h, h = bh % s.h;
  const int64_t off = (b * s.t + i) * s.c + h * s.hd;
  T acc = 0;
  for (int64_t d = lane; d < s.hd; d += 32) acc += dout[off + d] * out[off + d];
  acc = warp_sum(acc);
  if (lane == 0) dd[bh * s.t + i] = acc;
}

template <class T>
__global__ void attention_dq_kernel(T* dqkv, const T* dout, const T* qkv, const T* lse, const T* dd,
                                    AttnDims s, T scale, AttnDrop drop) {
  extern __shared__ unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (gw >= s.b * s.h * s.t) return;
  const int64_t i = gw % s.t, bh = gw / s.t, b = bh / s.h, h = bh % s.h;
  const int64_t row = s.row;
  T* qs = reinterpret_cast<T*>(smem_raw) + warp * 2 * s.hd;
  T* gs = qs + s.hd;
  const T* q = qkv + (b * s.t + i) * row + h * s.hd;
  const T* g = dout + (b * s.t + i) * s.c + h * s.hd;
  const T* kbase = qkv + b * s.t * row + s.k_col(h);
  const T* vbase = qkv + b * s.t * row + s.v_col(h);
  for (int64_t d = lane; d < s.hd; d += 32) {
    qs[d] = q[d];
    gs[d] = g[d];
  }
  __syncwarp();
  const T li = lse[bh * s.t + i], di = dd[bh * s.t + i];
  T acc[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) acc[r] = 0;
  for (int64_t j0 = 0; j0 <= i; j0 += 32) {
    const int64_t j = j0 + lane;
    T ds = 0;
    if (j <= i) {
      const T p = exp(dot_shared(qs, kbase + j * row, s.hd) * scale - li);
      const T dpv = dot_shared(gs, vbase + j * row, s.hd);
      const T mk = drop.on ? drop_factor<T>(drop, b, h, s.t, i, j) : T(1);
      ds = p * (mk * dpv - di) * scale;
    }
    accumulate_key_tile(acc, ds, kbase, row, i, j0, lane, s.hd);
  }
  T* dq = dqkv + (b * s.t + i) * row + h * s.hd;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    if (d < s.hd) dq[d] = acc[r];
  }
}

// One warp per (batch, kv head, key row j): dk_j and dv_j sum over the query heads of the kv
// head's group (in head order), each over its query rows i >= j (in row order).
template <class T>
__global__ void attention_dkv_kernel(T* dqkv, const T* dout, const T* qkv, const T* lse,
                                     const T* dd, AttnDims s, T scale, AttnDrop drop) {
  extern __shared__ unsigned char smem_raw[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t gw = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (gw >= s.b * s.kv * s.t) return;
  const int64_t j = gw % s.t, bg = gw / s.t, b = bg / s.kv, kvh = bg % s.kv;
  const int64_t row = s.row, group = s.h / s.kv;
  T* ks = reinterpret_cast<T*>(smem_raw) + warp * 2 * s.hd;
  T* vs = ks + s.hd;
  const T* krow = qkv + (b * s.t + j) * row + s.c + kvh * s.hd;
  const T* vrow = krow + s.kv * s.hd;
  for (int64_t d = lane; d < s.hd; d += 32) {
    ks[d] = krow[d];
    vs[d] = vrow[d];
  }
  __syncwarp();
  T dk[kMaxPerLane], dv[kMaxPerLane];
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) dk[r] = dv[r] = 0;
  for (int64_t h = kvh * group; h < (kvh + 1) * group; ++h) {
    const int64_t bh = b * s.h + h;
    const T* qbase = qkv + b * s.t * row + h * s.hd;
    const T* gbase = dout + b * s.t * s.c + h * s.hd;
    for (int64_t i0 = j; i0 < s.t; i0 += 32) {
      const int64_t i = i0 + lane;
      T ds = 0, pt = 0;
      if (i < s.t) {
        const T p = exp(dot_shared(qbase + i * row, ks, s.hd) * scale - lse[bh * s.t + i]);
        const T dpv = dot_shared(gbase + i * s.c, vs, s.hd);
        const T mk = drop.on ? drop_factor<T>(drop, b, h, s.t, i, j) : T(1);
        ds = p * (mk * dpv - dd[bh * s.t + i]) * scale;
        pt = p * mk;
      }
      const int count = static_cast<int>(s.t - i0 < 32 ? s.t - i0 : 32);
      for (int ii = 0; ii < count; ++ii) {
        const T dsi = __shfl_sync(0xffffffffu, ds, ii);
        const T pti = __shfl_sync(0xffffffffu, pt, ii);
        const T* qrow = qbase + (i0 + ii) * row;
        const T* grow = gbase + (i0 + ii) * s.c;
#pragma unroll
        for (int r = 0; r < kMaxPerLane; ++r) {
          const int64_t d = lane + 32 * r;
          if (d < s.hd) {
            dk[r] += dsi * qrow[d];
            dv[r] += pti * grow[d];
          }
        }
      }
    }
  }
  T* dkp = dqkv + (b * s.t + j) * row + s.c + kvh * s.hd;
  T* dvp = dkp + s.kv * s.hd;
#pragma unroll
  for (int r = 0; r < kMaxPerLane; ++r) {
    const int64_t d = lane + 32 * r;
    if (d < s.hd) {
      dkp[d] = dk[r];
      dvp[d] = dv[r];
    }
  }
}

// One block per head: scores (the CPU's left-to-right dot), max, exp, a sequential sum, P V.
__global__ void attention_decode_kernel(float* out, const float* q_all, const float* kc,
                                        const float* vc, float* scores_all, int64_t positions,
                                        int64_t hd, int64_t stride, float scale) {
  __shared__ float shared[32];
  __shared__ float total;
  const int64_t h = blockIdx.x;
  const float* q = q_all + h * hd;
  float* scores = scores_all + h * positions;
  float mx = -INFINITY;
  for (int64_t t = threadIdx.x; t < positions; t += blockDim.x) {
    float sc = 0.0f;
    for (int64_t d = 0; d < hd; ++d) sc += q[d] * kc[t * stride + h * hd + d];
    scores[t] = sc * scale;
    mx = fmaxf(mx, scores[t]);
  }
  mx = block_max(mx, shared);
  for (int64_t t = threadIdx.x; t < positions; t += blockDim.x) scores[t] = expf(scores[t] - mx);
  __syncthreads();
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    for (int64_t t = 0; t < positions; ++t) sum += scores[t];
    total = sum;
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < hd; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t t = 0; t < positions; ++t) acc += scores[t] / total * vc[t * stride + h * hd + d];
    out[h * hd + d] = acc;
  }
}

AttnDims attention_check(const AttentionArgs& a) {
  LLM_REQUIRE(a.batch >= 0 && a.seq >= 0 && a.channels > 0 && a.heads > 0,
              "cuda backend: attention needs batch, seq >= 0 and channels, heads > 0");
  LLM_REQUIRE(a.channels % a.heads == 0, "cuda backend: attention channels (", a.channels,
              ") must be divisible by heads (", a.heads, ")");
  LLM_REQUIRE(a.dropout >= 0.0 && a.dropout < 1.0,
              "cuda backend: attention dropout must be in [0, 1), got ", a.dropout);
  LLM_REQUIRE(a.channels / a.heads <= 32 * kMaxPerLane, "cuda backend: attention head_dim ",
              a.channels / a.heads, " exceeds ", 32 * kMaxPerLane);
  LLM_REQUIRE(a.kv_heads >= 0 && a.kv_heads <= a.heads && a.heads % a.kv() == 0,
              "cuda backend: attention kv_heads (", a.kv_heads, ") must divide heads (", a.heads,
              ")");
  return {a.batch, a.seq, a.channels, a.heads, a.channels / a.heads, a.kv(), a.qkv_width()};
}

AttnDrop drop_of(const AttentionArgs& a) {
  AttnDrop d{};
  d.on = a.dropout > 0.0;
  d.seed = a.seed;
  d.site = a.site;
  d.first_sequence = a.first_sequence;
  d.threshold = dropout_threshold(a.dropout);
  d.keep_scale = d.on ? 1.0 / (1.0 - a.dropout) : 1.0;
  return d;
}

void require_same(const Tensor& t, DType act, const char* what) {
  LLM_REQUIRE(t.data != nullptr && t.dtype == act, "cuda backend: ", what,
              " must have the activation dtype ", dtype_name(act));
}

}  // namespace

void cudnn_attention_delete(CudnnAttention* attention) {
  delete attention;
}

int64_t CudaBackend::cudnn_attention_calls() const {
  return cudnn_ ? cudnn_->calls() : 0;
}

CudnnAttention& CudaBackend::cudnn_attention() {
#ifdef LEDGERLM_HAVE_CUDNN_ATTENTION
  if (!cudnn_) cudnn_.reset(cudnn_attention_create(*this).release());
  return *cudnn_;
#else
  fail(
      "cuda backend: precision.attention = cudnn, but this build has no cuDNN attention (the "
      "cuDNN frontend headers were not found when it was configured)");
#endif
}

void CudaBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) {
  // cuDNN, unless it refused this shape (then our kernel runs it, forward and backward).
  if (args.impl == AttentionImpl::kCudnn && cudnn_attention().forward(out, lse, qkv, args)) return;
  LLM_REQUIRE(qkv.data && dtype_is_act(qkv.dtype), "cuda backend: attention qkv fp32/fp64");
  require_same(out, qkv.dtype, "attention_forward out");
  require_same(lse, qkv.dtype, "attention_forward lse");
  const AttnDims s = attention_check(args);
  const int64_t rows = s.b * s.h * s.t;
  if (rows == 0) return;
  const AttnDrop drop = drop_of(args);
  dispatch_act(qkv.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
    const size_t smem = static_cast<size_t>(kWarps * s.hd) * sizeof(T);
    attention_forward_kernel<T>
        <<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), 32 * kWarps, smem, stream_>>>(
            out.as<T>(), lse.as<T>(), qkv.as<const T>(), s, scale, drop);
  });
  launch_check("attention_forward");
}

void CudaBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                                     const AttentionArgs& args) {
  if (args.impl == AttentionImpl::kCudnn &&
      cudnn_attention().backward(dqkv, dout, qkv, out, lse, args))
    return;
  LLM_REQUIRE(qkv.data && dtype_is_act(qkv.dtype), "cuda backend: attention qkv fp32/fp64");
  const DType act = qkv.dtype;
  require_same(dqkv, act, "attention_backward dqkv");
  require_same(dout, act, "attention_backward dout");
  require_same(out, act, "attention_backward out");
  require_same(lse, act, "attention_backward lse");
  const AttnDims s = attention_check(args);
  const int64_t rows = s.b * s.h * s.t;
  if (rows == 0) return;
  const AttnDrop drop = drop_of(args);
  dispatch_act(act, [&](auto tag) {
    using T = decltype(tag);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(s.hd)));
    T* dd = static_cast<T*>(workspace(WorkSlot::kScratch, static_cast<size_t>(rows) * sizeof(T)));
    const unsigned blocks = static_cast<unsigned>((rows + kWarps - 1) / kWarps);
    // dk and dv: a warp per (batch, kv head, key row).
    const int64_t kv_rows = s.b * s.kv * s.t;
    const unsigned kv_blocks = static_cast<unsigned>((kv_rows + kWarps - 1) / kWarps);
    const size_t smem = static_cast<size_t>(kWarps * 2 * s.hd) * sizeof(T);
    attention_rowdot_kernel<T>
        <<<blocks, 32 * kWarps, 0, stream_>>>(dd, dout.as<const T>(), out.as<const T>(), s);
    launch_check("attention rowdot");
    attention_dq_kernel<T><<<blocks, 32 * kWarps, smem, stream_>>>(
        dqkv.as<T>(), dout.as<const T>(), qkv.as<const T>(), lse.as<const T>(), dd, s, scale, drop);
    launch_check("attention dq");
    attention_dkv_kernel<T><<<kv_blocks, 32 * kWarps, smem, stream_>>>(
        dqkv.as<T>(), dout.as<const T>(), qkv.as<const T>(), lse.as<const T>(), dd, s, scale, drop);
    launch_check("attention dkv");
  });
}

void CudaBackend::attention_decode(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache,
                                   int64_t positions, int64_t heads, int64_t channels,
                                   int64_t stride) {
  LLM_REQUIRE(out.dtype == DType::kF32 && q.dtype == DType::kF32 && k_cache.dtype == DType::kF32 &&
                  v_cache.dtype == DType::kF32,
              "cuda backend: attention_decode is fp32");
  LLM_REQUIRE(positions > 0 && heads > 0 && channels % heads == 0 && stride >= channels,
              "cuda backend: attention_decode needs positions > 0 and channels divisible by heads");
  const int64_t hd = channels / heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  float* scores = static_cast<float*>(
      workspace(WorkSlot::kScratch2, static_cast<size_t>(heads * positions) * sizeof(float)));
  attention_decode_kernel<<<static_cast<unsigned>(heads), 256, 0, stream_>>>(
      out.as<float>(), q.as<const float>(), k_cache.as<const float>(), v_cache.as<const float>(),
      scores, positions, hd, stride, scale);
  launch_check("attention_decode");
}

}  // namespace ledgerlm::cuda
