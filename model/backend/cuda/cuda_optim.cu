// Backend::optimizer_op on the GPU: every OptimOpKind of optim_op.h. optim_op_visit picks the
// kind and types the arrays; Launches holds each kind's kernel launches.
//
// The per-element arithmetic is not written here: each kernel calls the LLM_HD element
// functions of optim_kernels.h / optim_kernels_trust.h / optim_kernels_8bit.h / quant8.h
// (sgd_update_momentum_at, adamw_update_at, lamb_moments_at, ...), the functions the CPU loops
// call, with the same gradient views and state storage types. CUDA code is compiled with
// --fmad=false so no multiply-add is contracted that the CPU build does not contract.
// Partial sums use the CPU's chunks (kOptimSumChunk); each chunk is reduced by one block in a
// fixed order and the chunks are added in order, so the sums are reproducible (they differ from
// the CPU's left-to-right sums only by double rounding). Adafactor's factored statistics are
// host arrays in OptimOp (row_acc, col_acc, row_frac, col): they are uploaded, updated in the
// CPU's order, and brought back, counted in the transfer statistics.
#include "model/backend/cuda/cuda_common.cuh"
#include "model/backend/optim/optim_kernels_8bit.h"
#include "model/backend/optim/optim_op.h"
#include "model/backend/optim/optim_op_visit.h"
#include "model/backend/optim/quant8.h"

namespace ledgerlm::cuda {
namespace {

// ---- elementwise kinds ---------------------------------------------------------------------
__global__ void sgd_decay_kernel(float* w, int64_t n, SgdStep<float> s) {
  LLM_GRID_STRIDE(i, n) sgd_decay_at(w, i, s);
}
template <class S, class G>
__global__ void sgd_buf_kernel(const float* w, S* buf, G g, int64_t n, SgdStep<float> s) {
  LLM_GRID_STRIDE(i, n) sgd_buf_at(w, buf, g, i, s);
}
template <class S, class G>
__global__ void sgd_param_kernel(float* w, const S* buf, G g, int64_t n, SgdStep<float> s) {
  LLM_GRID_STRIDE(i, n) sgd_param_at(w, buf, g, i, s);
}
template <class G>
__global__ void sgd_plain_kernel(float* w, G g, int64_t n, SgdStep<float> s) {
  LLM_GRID_STRIDE(i, n) sgd_update_plain_at(w, g, i, s);
}
template <class S, class G>
__global__ void sgd_momentum_kernel(float* w, S* buf, G g, int64_t n, SgdStep<float> s) {
  LLM_GRID_STRIDE(i, n) sgd_update_momentum_at(w, buf, g, i, s);
}
__global__ void adamw_decay_kernel(float* w, int64_t n, AdamWStep<float> s) {
  LLM_GRID_STRIDE(i, n) adamw_decay_at(w, i, s);
}
template <class S, class G>
__global__ void adamw_moments_kernel(S* m, S* v, G g, int64_t n, AdamWStep<float> s) {
  LLM_GRID_STRIDE(i, n) adamw_moments_at<float>(m, v, g, i, s);
}
template <class S>
__global__ void adamw_param_kernel(float* w, const S* m, const S* v, int64_t n,
                                   AdamWStep<float> s) {
  LLM_GRID_STRIDE(i, n) adamw_param_at(w, m, v, i, s);
}
template <class S, class G>
__global__ void adamw_fused_kernel(float* w, S* m, S* v, G g, int64_t n, AdamWStep<float> s) {
  LLM_GRID_STRIDE(i, n) adamw_update_at(w, m, v, g, i, s);
}
template <class S, class G>
__global__ void lion_kernel(float* w, S* m, G g, int64_t n, LionStep<float> s) {
  LLM_GRID_STRIDE(i, n) lion_update_at(w, m, g, i, s);
}
template <class S, class G>
__global__ void ademamix_kernel(float* w, S* m1, S* nu, S* m2, G g, int64_t n,
                                AdEMAMixStep<float> s) {
  LLM_GRID_STRIDE(i, n) ademamix_update_at(w, m1, nu, m2, g, i, s);
}
template <class S, class G, class O>
__global__ void schedulefree_kernel(float* x, S* z, S* v, G g, O y, int64_t n,
                                    ScheduleFreeStep<float> s) {
  LLM_GRID_STRIDE(i, n) schedulefree_update_at(x, z, v, g, y, i, s);
}
template <class S, class O>
__global__ void schedulefree_y_kernel(const float* x, const S* z, O y, int64_t n,
                                      ScheduleFreeStep<float> s) {
  LLM_GRID_STRIDE(i, n) schedulefree_y_at(x, z, y, i, s);
}
template <class S, class G>
__global__ void muon_momentum_kernel(S* buf, G g, OutF32 u, int64_t n, MuonStep<float> s) {
  LLM_GRID_STRIDE(i, n) muon_momentum_at(buf, g, u, i, s);
}
template <class G>
__global__ void muon_apply_kernel(float* w, G o, int64_t n, MuonStep<float> s) {
  LLM_GRID_STRIDE(i, n) muon_apply_at(w, o, i, s);
}
template <class S>
__global__ void lamb_apply_kernel(float* w, const S* m, const S* v, int64_t n, LambStep<float> s,
                                  float scale) {
  LLM_GRID_STRIDE(i, n) lamb_apply_at(w, m, v, i, s, scale);
}
template <class S, class G>
__global__ void lars_apply_kernel(float* w, S* buf, G g, int64_t n, LarsStep<float> s) {
  LLM_GRID_STRIDE(i, n) lars_apply_at(w, buf, g, i, s);
}
template <class S, class G>
__global__ void adafactor_apply_factored_kernel(float* w, S* m, G g, int64_t n, int64_t p0,
                                                int64_t cols, const float* row_frac,
                                                const float* col, float u_scale, float alpha,
                                                AdafactorStep<float> s) {
  LLM_GRID_STRIDE(i, n)
  adafactor_apply_factored_at(w, m, g, i, p0, cols, row_frac, col, u_scale, alpha, s);
}
template <class S, class G>
__global__ void adafactor_apply_vector_kernel(float* w, S* m, const S* v, G g, int64_t n,
                                              float u_scale, float alpha, AdafactorStep<float> s) {
  LLM_GRID_STRIDE(i, n) adafactor_apply_vector_at(w, m, v, g, i, u_scale, alpha, s);
}

// ---- reductions: one block per kOptimSumChunk chunk, then the chunks in order ----------------
template <int K, class F>
__global__ void chunked_sums_kernel(int64_t n, double* partial, F term) {
  __shared__ double shared[32];
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kOptimSumChunk;
  const int64_t end = begin + kOptimSumChunk < n ? begin + kOptimSumChunk : n;
  double acc[K];
  for (int k = 0; k < K; ++k) acc[k] = 0.0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) term(i, acc);
  for (int k = 0; k < K; ++k) {
    const double t = block_sum(acc[k], shared);
    if (threadIdx.x == 0) partial[blockIdx.x * K + k] = t;
  }
}

template <int K>
__global__ void chunk_totals_kernel(double* partial, int64_t chunks) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  for (int k = 0; k < K; ++k) {
    double total = 0.0;
    for (int64_t c = 0; c < chunks; ++c) total += partial[c * K + k];
    partial[chunks * K + k] = total;
  }
}

// Functors (device lambdas need --extended-lambda; plain structs keep the build simple).
template <class S, class G>
struct LambMomentsTerm {
  const float* w;
  S* m;
  S* v;
  G g;
  LambStep<float> s;
  __device__ void operator()(int64_t i, double* acc) const {
    lamb_moments_at(w, m, v, g, i, s, acc);
  }
};
template <class G>
struct LarsNormsTerm {
  const float* w;
  G g;
  __device__ void operator()(int64_t i, double* acc) const { lars_norms_at(w, g, i, acc); }
};
template <class S, class G>
struct AdafactorVectorTerm {
  const float* w;
  S* v;
  G g;
  AdafactorStep<float> s;
  __device__ void operator()(int64_t i, double* acc) const {
    adafactor_vector_at(w, v, g, i, s, acc);
  }
};
template <class G>
struct AdafactorU2Term {
  G g;
  int64_t p0, cols;
  const float* row_frac;
  const float* col;
  __device__ void operator()(int64_t i, double* acc) const {
    adafactor_factored_u2_at(g, i, p0, cols, row_frac, col, acc);
  }
};
struct SquaresTerm {
  const float* w;
  __device__ void operator()(int64_t i, double* acc) const {
    const double wi = static_cast<double>(w[i]);
    acc[0] += wi * wi;
  }
};

template <int K, class F>
void chunked_sums(CudaBackend& be, int64_t n, F term, double* out) {
  for (int k = 0; k < K; ++k) out[k] = 0.0;
  if (n <= 0) return;
  const int64_t chunks = (n + kOptimSumChunk - 1) / kOptimSumChunk;
  double* partial = static_cast<double*>(
      be.workspace(WorkSlot::kPartials, static_cast<size_t>((chunks + 1) * K) * sizeof(double)));
  chunked_sums_kernel<K, F>
      <<<static_cast<unsigned>(chunks), kThreads, 0, be.stream()>>>(n, partial, term);
  launch_check("optimizer sums");
  chunk_totals_kernel<K><<<1, 32, 0, be.stream()>>>(partial, chunks);
  launch_check("optimizer sum totals");
  LLM_CUDA(cudaMemcpyAsync(out, partial + chunks * K, K * sizeof(double), cudaMemcpyDeviceToHost,
                           be.stream()));
  be.synchronize();
}

// ---- Adafactor factored statistics (rows and columns of a matrix slice) ----------------------
template <class G>
__global__ void adafactor_row_sums_kernel(G g, int64_t p0, int64_t n, int64_t cols, int64_t r0,
                                          int64_t r1, AdafactorStep<float> s, double* row_acc) {
  LLM_GRID_STRIDE(k, r1 - r0) {
    const int64_t r = r0 + k;
    const int64_t lo = p0 > r * cols ? p0 : r * cols;
    const int64_t hi = p0 + n < (r + 1) * cols ? p0 + n : (r + 1) * cols;
    double acc = 0.0;
    for (int64_t p = lo; p < hi; ++p) acc += adafactor_elem_sq(g[p - p0], s);
    row_acc[k] += acc;
  }
}
template <class G>
__global__ void adafactor_col_sums_kernel(G g, int64_t p0, int64_t n, int64_t cols, int64_t r0,
                                          int64_t r1, AdafactorStep<float> s, double* col_acc) {
  LLM_GRID_STRIDE(c, cols) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t p = r * cols + c;
      if (p >= p0 && p < p0 + n) col_acc[c] += adafactor_elem_sq(g[p - p0], s);
    }
  }
}

// ---- 8-bit AdamW: one block per quantization block ----------------------------------------------
template <class G>
__global__ void adamw8bit_kernel(float* w, uint8_t* codes_m, uint8_t* codes_v, float* absmax_m,
                                 float* absmax_v, G g, int64_t n, int64_t block,
                                 const QuantMap* maps, AdamWStep<float> s) {
  extern __shared__ float buf[];
  __shared__ float shared[32];
  float* mb = buf;
  float* vb = buf + block;
  const QuantMap& sm = maps[0];
  const QuantMap& um = maps[1];
  const int64_t b = blockIdx.x, i0 = b * block;
  const int64_t len = block < n - i0 ? block : n - i0;
  const float am = absmax_m[b], av = absmax_v[b];
  float mx_m = 0.0f, mx_v = 0.0f;
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    float mi = sm.value[codes_m[i0 + i]] * am;
    float vi = um.value[codes_v[i0 + i]] * av;
    adamw8bit_elem(w[i0 + i], mi, vi, g[i0 + i], s);
    mb[i] = mi;
    vb[i] = vi;
    mx_m = fmaxf(mx_m, fabsf(mi));
    mx_v = fmaxf(mx_v, fabsf(vi));
  }
  mx_m = block_max(mx_m, shared);
  mx_v = block_max(mx_v, shared);
  const float inv_m = quant_inverse_absmax(mx_m), inv_v = quant_inverse_absmax(mx_v);
  for (int64_t i = threadIdx.x; i < len; i += blockDim.x) {
    codes_m[i0 + i] = quant_encode(sm, mb[i] * inv_m);
    codes_v[i0 + i] = quant_encode(um, vb[i] * inv_v);
  }
  if (threadIdx.x == 0) {
    absmax_m[b] = mx_m;
    absmax_v[b] = mx_v;
  }
}

// ---- the kernels of each kind (optim_op_visit calls the kind's method) -----------------------
// One launch per kind on the backend's stream; the reductions bring their sums back.
struct Launches {
  CudaBackend& be;
  double* sums;  // kinds that reduce write here
  unsigned blocks;
  cudaStream_t st;

  void sgd_decay(float* w, int64_t n, const SgdStep<float>& s) const {
    if (s.decay != 1.0f) sgd_decay_kernel<<<blocks, kThreads, 0, st>>>(w, n, s);
    launch_check("sgd decay");
  }
  template <class S, class G>
  void sgd_buf(float* w, S* buf, G g, int64_t n, const SgdStep<float>& s) const {
    if (s.momentum == 0.0f) return;
    sgd_buf_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, buf, g, n, s);
  }
  template <class S, class G>
  void sgd_param(float* w, S* buf, G g, int64_t n, const SgdStep<float>& s) const {
    sgd_param_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, buf, g, n, s);
  }
  template <class S, class G>
  void sgd_fused(float* w, S* buf, G g, int64_t n, const SgdStep<float>& s) const {
    if (s.momentum == 0.0f) {
      sgd_plain_kernel<G><<<blocks, kThreads, 0, st>>>(w, g, n, s);
      return;
    }
    sgd_momentum_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, buf, g, n, s);
  }
  void adamw_decay(float* w, int64_t n, const AdamWStep<float>& s) const {
    if (s.decay != 1.0f) adamw_decay_kernel<<<blocks, kThreads, 0, st>>>(w, n, s);
    launch_check("adamw decay");
  }
  template <class S, class G>
  void adamw_moments(S* m, S* v, G g, int64_t n, const AdamWStep<float>& s) const {
    adamw_moments_kernel<S, G><<<blocks, kThreads, 0, st>>>(m, v, g, n, s);
  }
  template <class S>
  void adamw_param(float* w, S* m, S* v, int64_t n, const AdamWStep<float>& s) const {
    adamw_param_kernel<S><<<blocks, kThreads, 0, st>>>(w, m, v, n, s);
    launch_check("adamw param");
  }
  template <class S, class G>
  void adamw_fused(float* w, S* m, S* v, G g, int64_t n, const AdamWStep<float>& s) const {
    adamw_fused_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, m, v, g, n, s);
  }
  template <class S, class G>
  void lion(float* w, S* m, G g, int64_t n, const LionStep<float>& s) const {
    lion_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, m, g, n, s);
    launch_check("lion");
  }
  template <class S, class G>
  void ademamix(float* w, S* m1, S* nu, S* m2, G g, int64_t n, const AdEMAMixStep<float>& s) const {
    ademamix_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, m1, nu, m2, g, n, s);
    launch_check("ademamix");
  }
  template <class S, class G, class O>
  void schedulefree(float* x, S* z, S* v, G g, O y, int64_t n,
                    const ScheduleFreeStep<float>& s) const {
    schedulefree_kernel<S, G, O><<<blocks, kThreads, 0, st>>>(x, z, v, g, y, n, s);
    launch_check("schedule-free adamw");
  }
  template <class S, class O>
  void schedulefree_y(const float* x, const S* z, O y, int64_t n,
                      const ScheduleFreeStep<float>& s) const {
    schedulefree_y_kernel<S, O><<<blocks, kThreads, 0, st>>>(x, z, y, n, s);
    launch_check("schedule-free y");
  }
  template <class S, class G>
  void muon_momentum(S* buf, G g, OutF32 u, int64_t n, const MuonStep<float>& s) const {
    muon_momentum_kernel<S, G><<<blocks, kThreads, 0, st>>>(buf, g, u, n, s);
    launch_check("muon momentum");
  }
  template <class G>
  void muon_apply(float* w, G o, int64_t n, const MuonStep<float>& s) const {
    muon_apply_kernel<G><<<blocks, kThreads, 0, st>>>(w, o, n, s);
    launch_check("muon apply");
  }
  template <class G>
  void adamw8bit(float* w, uint8_t* codes_m, uint8_t* codes_v, float* absmax_m, float* absmax_v,
                 G g, int64_t n, int64_t block, const AdamWStep<float>& s) const {
    LLM_REQUIRE(block > 0, "cuda backend: 8-bit AdamW needs a block size > 0");
    const int64_t qblocks = (n + block - 1) / block;
    const size_t smem = static_cast<size_t>(2 * block) * sizeof(float);
    auto kernel = adamw8bit_kernel<G>;
    if (smem > 48 * 1024)
      LLM_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(smem)));
    const QuantMap* maps = static_cast<const QuantMap*>(be.quant_maps());
    kernel<<<static_cast<unsigned>(qblocks), kThreads, smem, st>>>(w, codes_m, codes_v, absmax_m,
                                                                   absmax_v, g, n, block, maps, s);
  }
  template <class S, class G>
  void lamb_moments(float* w, S* m, S* v, G g, int64_t n, const LambStep<float>& s) const {
    chunked_sums<2>(be, n, LambMomentsTerm<S, G>{w, m, v, g, s}, sums);
  }
  template <class S>
  void lamb_apply(float* w, S* m, S* v, int64_t n, const LambStep<float>& s, float scale) const {
    lamb_apply_kernel<S><<<blocks, kThreads, 0, st>>>(w, m, v, n, s, scale);
    launch_check("lamb apply");
  }
  template <class G>
  void lars_norms(float* w, G g, int64_t n) const {
    chunked_sums<2>(be, n, LarsNormsTerm<G>{w, g}, sums);
  }
  template <class S, class G>
  void lars_apply(float* w, S* buf, G g, int64_t n, const LarsStep<float>& s) const {
    lars_apply_kernel<S, G><<<blocks, kThreads, 0, st>>>(w, buf, g, n, s);
  }
  // The row and column accumulators of the slice's rows go up, are added to, and come back.
  template <class G>
  void adafactor_factored_sums(float* w, G g, int64_t p0, int64_t n, int64_t cols,
                               const AdafactorStep<float>& s, double* row_acc,
                               double* col_acc) const {
    const int64_t r0 = p0 / cols, r1 = (p0 + n + cols - 1) / cols;
    const int64_t nr = r1 - r0;
    double* dev = static_cast<double*>(
        be.workspace(WorkSlot::kOptimSide, static_cast<size_t>(nr + cols) * sizeof(double)));
    double* drow = dev;
    double* dcol = dev + nr;
    LLM_CUDA(cudaMemcpyAsync(drow, row_acc + r0, nr * sizeof(double), cudaMemcpyHostToDevice, st));
    LLM_CUDA(cudaMemcpyAsync(dcol, col_acc, cols * sizeof(double), cudaMemcpyHostToDevice, st));
    be.count_up((nr + cols) * static_cast<int64_t>(sizeof(double)));
    if (n > 0) {
      adafactor_row_sums_kernel<G>
          <<<blocks_for(nr), kThreads, 0, st>>>(g, p0, n, cols, r0, r1, s, drow);
      adafactor_col_sums_kernel<G>
          <<<blocks_for(cols), kThreads, 0, st>>>(g, p0, n, cols, r0, r1, s, dcol);
      launch_check("adafactor factored sums");
    }
    LLM_CUDA(cudaMemcpyAsync(row_acc + r0, drow, nr * sizeof(double), cudaMemcpyDeviceToHost, st));
    LLM_CUDA(cudaMemcpyAsync(col_acc, dcol, cols * sizeof(double), cudaMemcpyDeviceToHost, st));
    be.synchronize();
    be.count_down((nr + cols) * static_cast<int64_t>(sizeof(double)));
    double w2[1];
    chunked_sums<1>(be, n, SquaresTerm{w}, w2);
    sums[0] = w2[0];
  }
  // Uploads the row fractions and column statistics the slice reads: rows [0, r1) (the kernels
  // index rows from 0), then the columns; returns the device copy (rows first).
  float* adafactor_upload_stats(int64_t p0, int64_t n, int64_t cols, const float* row_frac,
                                const float* col) const {
    const int64_t r1 = (p0 + n + cols - 1) / cols;
    float* dev = static_cast<float*>(
        be.workspace(WorkSlot::kOptimSide, static_cast<size_t>(r1 + cols) * sizeof(float)));
    LLM_CUDA(cudaMemcpyAsync(dev, row_frac, r1 * sizeof(float), cudaMemcpyHostToDevice, st));
    LLM_CUDA(cudaMemcpyAsync(dev + r1, col, cols * sizeof(float), cudaMemcpyHostToDevice, st));
    be.count_up((r1 + cols) * static_cast<int64_t>(sizeof(float)));
    return dev;
  }
  template <class G>
  void adafactor_factored_u2(G g, int64_t p0, int64_t n, int64_t cols, const float* row_frac,
                             const float* col) const {
    const int64_t r1 = (p0 + n + cols - 1) / cols;
    const float* dev = adafactor_upload_stats(p0, n, cols, row_frac, col);
    double u2[1];
    chunked_sums<1>(be, n, AdafactorU2Term<G>{g, p0, cols, dev, dev + r1}, u2);
    sums[0] = u2[0];
  }
  template <class S, class G>
  void adafactor_vector(float* w, S* v, G g, int64_t n, const AdafactorStep<float>& s) const {
    chunked_sums<2>(be, n, AdafactorVectorTerm<S, G>{w, v, g, s}, sums);
  }
  template <class S, class G>
  void adafactor_apply_factored(float* w, S* m, G g, int64_t p0, int64_t n, int64_t cols,
                                const float* row_frac, const float* col, float u_scale, float alpha,
                                const AdafactorStep<float>& s) const {
    const int64_t r1 = (p0 + n + cols - 1) / cols;
    const float* dev = adafactor_upload_stats(p0, n, cols, row_frac, col);
    adafactor_apply_factored_kernel<S, G>
        <<<blocks, kThreads, 0, st>>>(w, m, g, n, p0, cols, dev, dev + r1, u_scale, alpha, s);
    // The side arrays are reused by the next op: let this kernel finish reading them.
    be.synchronize();
  }
  template <class S, class G>
  void adafactor_apply_vector(float* w, S* m, S* v, G g, int64_t n, float u_scale, float alpha,
                              const AdafactorStep<float>& s) const {
    adafactor_apply_vector_kernel<S, G>
        <<<blocks, kThreads, 0, st>>>(w, m, v, g, n, u_scale, alpha, s);
  }
};

}  // namespace

const void* CudaBackend::quant_maps() {
  if (quant_maps_.empty()) {
    quant_maps_ = allocate(MemTag::kOptimCodes, 2 * sizeof(QuantMap));
    const QuantMap maps[2] = {quant_map_signed(), quant_map_unsigned()};
    copy_from_host(Tensor(quant_maps_.data(), DType::kU8), maps,
                   static_cast<int64_t>(sizeof(maps)));
  }
  return quant_maps_.data();
}

void CudaBackend::optimizer_op(const OptimOp& op, double* sums) {
  if (optim_op_reduces(op.kind)) note_down(2 * sizeof(double));
  if (op.n <= 0 && !optim_op_reduces(op.kind)) return;
  optim_op_visit(op, Launches{*this, sums, blocks_for(op.n), stream_});
  launch_check("optimizer_op");
}

}  // namespace ledgerlm::cuda
