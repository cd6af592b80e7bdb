// The Backend interface: memory and every op the GPT model calls. Model, optimizer and trainer
// code are written once against it; the CPU backend (backend/cpu) is the reference and a real
// trainer, the CUDA backend (backend/cuda) implements the same entry points.
//
// Conventions for all ops:
// - Tensors are type-erased pointers plus a dtype; shapes come from the explicit size arguments.
//   All arrays are row-major and contiguous.
// - Activations ("act") are fp32, or fp64 for gradient checks in tests. Parameters may be
//   fp32/bf16/fp16 (or fp64 with fp64 activations); gradients may be fp32/bf16/fp16 (or fp64).
//   Low-precision inputs are widened to fp32 and results rounded to nearest even on store.
// - Parameter gradients are always ACCUMULATED (+=) so micro-batches sum without extra passes;
//   activation gradients are WRITTEN (=) unless the argument says otherwise.
// - Tensors passed to ops live in the backend's memory (memory_space()). Host code reaches
//   them only through copy_from_host / copy_to_host; a CPU backend's memory happens to be host
//   memory, a device backend's is not.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "model/base/dtype.h"
#include "model/base/memory.h"

namespace ledgerlm {

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;

  Tensor() = default;
  Tensor(void* d, DType t) : data(d), dtype(t) {}
  bool empty() const { return data == nullptr; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data);
  }
  // The view `elements` elements further on.
  Tensor offset(int64_t elements) const {
    return Tensor(static_cast<char*>(data) + elements * static_cast<int64_t>(dtype_size(dtype)),
                  dtype);
  }
};

enum class Rounding : uint8_t { kNearest, kStochastic };

// What sum_squares_fold does with x and y besides summing the squares of x.
enum class SquaresFold : uint8_t {
  kMove,     // y = x, then x = 0
  kAddTo,    // y += x, then x = 0
  kAddFrom,  // x += y (the squares are of x before the addition)
};

// C[M,N] (+)= op(A) op(B) (+ bias). Row-major: A is [M,K] ([K,M] if trans_a), B is [K,N]
// ([N,K] if trans_b). A linear layer's forward is A=x[M,K], B=W[N,K] with trans_b.
struct GemmArgs {
  Tensor a, b, c;
  Tensor bias;  // optional, [N], added to every row of C
  int64_t m = 0, n = 0, k = 0;
  bool trans_a = false;
  bool trans_b = false;
  bool accumulate = false;  // C += ... instead of C = ...
  // precision.matmul = bf16: A and B are rounded to bf16 before the product (products exact in
  // fp32, sums in fp32), run on bf16 dot-product instructions where the device has them.
  bool bf16_inputs = false;
  // precision.matmul = tf32: fp32 operands multiplied on TF32 tensor cores (10-bit mantissa
  // products, fp32 sums). A CUDA mode; the configuration refuses it on the CPU.
  bool tf32 = false;
};

// Which random numbers a dropout mask uses. Element e of sequence s (the sequence's index in the
// step's global batch, so the mask does not depend on how the batch is split into micro-batches
// or ranks) is kept iff word e % 4 of rng_bits(seed, kDropout, site, (s << 40) | (e / 4)) is
// >= p * 2^32: `site` names the place (step, layer, which dropout), e < 2^42, s < 2^24.
struct DropoutKey {
  uint64_t seed = 0;
  uint64_t site = 0;
  uint64_t first_sequence = 0;    // global-batch index of the first sequence in the tensor
  int64_t sequence_elements = 0;  // elements per sequence: the tensor holds n / this sequences
};

// Which implementation runs attention_forward/backward (precision.attention resolved). kCudnn:
// cuDNN's fused SDPA (CUDA backend, bf16 inputs and outputs, fp32 statistics, no dropout); the
// lse it stores is the same natural-log log-sum-exp of the scaled scores as our kernel's.
enum class AttentionImpl : uint8_t { kOwn, kCudnn };

// Causal multi-head self-attention on a fused qkv projection, flash-style: for backward only
// the output and the per-row log-sum-exp are kept (B*H*T values), never the T x T probabilities.
struct AttentionArgs {
  int64_t batch = 0, seq = 0, channels = 0, heads = 0;
  double dropout = 0.0;         // attention-probability dropout
  uint64_t seed = 0;            // dropout mask key (see DropoutKey): sequence b of the batch is
  uint64_t site = 0;            // global sequence first_sequence + b, its element index is
  uint64_t first_sequence = 0;  // (head * T + query) * T + key
  AttentionImpl impl = AttentionImpl::kOwn;  // backends without cuDNN refuse kCudnn
  // Grouped-query attention (model.n_kv_head): heads of k and v, 0 = heads. qkv rows are then
  // [q: channels | k: kv_heads*hd | v: kv_heads*hd] and query head h reads kv head
  // h / (heads / kv_heads).
  int64_t kv_heads = 0;
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t qkv_width() const { return channels + 2 * kv() * (channels / heads); }
};

// model.norm: which norm norm_forward/norm_backward compute over the last dim.
struct NormArgs {
  // false: LayerNorm, xhat = (x - mean) * rstd with rstd = 1/sqrt(var + eps); true: RMSNorm,
  // xhat = x * rstd with rstd = 1/sqrt(mean(x^2) + eps) (no mean, never a bias).
  bool rms = false;
  double eps = 1e-5;
  int64_t rows = 0, channels = 0;
};

struct OptimOp;  // model/backend/optim/optim_op.h

// Backend construction options (the factory's input).
struct BackendOptions {
  int threads = 0;  // CPU threads (0: all cores / ranks on this node)
  int device = 0;   // accelerator index for device backends
};

// What crossed between host and backend memory (copies, and scalars that reductions return):
// lets a test check that a training step moves only tokens up and a few scalars down.
struct TransferStats {
  int64_t up_calls = 0, up_bytes = 0;      // host -> backend
  int64_t down_calls = 0, down_bytes = 0;  // backend -> host (copies and returned scalars)
};

// A device backend's memory as its driver reports it (cudaMemGetInfo): the independent figure
// the ledger reconciles the tracker with, as it uses the process RSS for host memory.
struct DeviceMemoryInfo {
  int64_t used = 0;      // in use on the device now (total - free, every process)
  int64_t baseline = 0;  // in use right after the backend was created (context, others)
  int64_t total = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const TransferStats& transfers() const { return transfers_; }
  virtual void reset_transfers() { transfers_ = TransferStats{}; }
  virtual std::string name() const = 0;
  virtual int num_threads() const = 0;
  // The accelerator's name as its driver reports it (cudaDeviceProp::name, e.g. "NVIDIA H200"):
  // what `ledgerlm bench` looks its peak rate up by. Empty for host-memory backends.
  virtual std::string device_name() const { return ""; }
  // Waits until every op called so far has finished on the device, and reports (as an Error
  // naming the backend and the failing call) an asynchronous error the device raised meanwhile.
  // Host-memory backends finish each op before it returns: for them it does nothing. Timing
  // code calls it before reading a host clock, so device work is charged to the op that queued
  // it rather than to whichever later op happens to wait for the device.
  virtual void synchronize() {}

  // ---- memory -------------------------------------------------------------------------------
  virtual MemoryTracker& tracker() = 0;
  // Where this backend's allocations live (host for the CPU backend).
  virtual MemSpace memory_space() const = 0;
  // The driver's figures for a device backend (false for host memory backends).
  virtual bool device_memory(DeviceMemoryInfo* info) {
    (void)info;
    return false;
  }
  // The device queue this backend's work runs on, for code that must order its own device work
  // after it without including the vendor's headers (a cudaStream_t for the CUDA backend; nullptr
  // for host backends). The NCCL Comm makes its stream wait on this one and this one on its own.
  virtual void* native_stream() { return nullptr; }
  // A zero-filled allocation in the backend's memory, accounted to `tag`.
  virtual Buffer allocate(MemTag tag, size_t bytes) = 0;
  // Explicit copies of n elements of dst.dtype (src has the same dtype): host memory into the
  // backend's, the backend's into host memory, and within the backend's memory. The only way
  // host code moves data in or out of backend buffers.
  virtual void copy_from_host(Tensor dst, const void* src, int64_t n) = 0;
  virtual void copy_to_host(void* dst, Tensor src, int64_t n) = 0;
  virtual void copy(Tensor dst, Tensor src, int64_t n) = 0;
  virtual void zero(Tensor t, int64_t n) = 0;
  // dst[i] = src[i] converted between dtypes (rounding as asked when narrowing to bf16/fp16;
  // stochastic rounding draws from (seed, kRounding, stream_offset + i)).
  virtual void convert(Tensor dst, Tensor src, int64_t n, Rounding rounding = Rounding::kNearest,
                       uint64_t seed = 0, uint64_t stream_offset = 0) = 0;
  // dst += src (dst fp32/fp64/bf16/fp16, src any float dtype).
  virtual void accumulate(Tensor dst, Tensor src, int64_t n) = 0;
  // sum of x (fp32 or fp64), accumulated in double in a fixed order: a loss comes back as one
  // scalar instead of per-token values.
  virtual double sum(Tensor x, int64_t n) = 0;
  // sum of squares of x (any float dtype), accumulated in double in a fixed order.
  virtual double sum_squares(Tensor x, int64_t n) = 0;
  // sum_squares(x, n), bitwise the same value, and in the same pass over memory the fold (x and y
  // of one float dtype; additions as accumulate's). One pass instead of a reduction, a copy or
  // accumulate, and a zeroing: train.gns folds each micro-batch's gradient into the step's sum.
  virtual double sum_squares_fold(Tensor x, Tensor y, int64_t n, SquaresFold fold) = 0;
  // true when every element of x is finite.
  virtual bool all_finite(Tensor x, int64_t n) = 0;
  // x *= s
  virtual void scale(Tensor x, int64_t n, double s) = 0;

  // ---- ops ----------------------------------------------------------------------------------
  virtual void gemm(const GemmArgs& args) = 0;
  // dbias[N] += sum over rows of dout[M,N].
  virtual void bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) = 0;

  // out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]   (tokens int32 [B*T], out act [B*T, C]); an
  // empty wpe (model.position = rope) adds nothing, and backward's empty dwpe gets nothing.
  virtual void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int64_t batch,
                                 int64_t seq, int64_t channels) = 0;
  // dwte[tokens[b,t],:] += dout[b,t,:]; dwpe[t,:] += dout[b,t,:]  (fixed order: deterministic)
  virtual void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens,
                                  int64_t batch, int64_t seq, int64_t channels) = 0;

  // out = (x - mean) * rstd * weight + bias over the last dim C; mean and rstd ([N], act dtype)
  // are saved for backward. eps = 1e-5.
  virtual void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                                 Tensor bias, int64_t rows, int64_t channels) = 0;
  // dx += ...; dweight += ...; dbias += ...
  virtual void layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                                  Tensor weight, Tensor mean, Tensor rstd, int64_t rows,
                                  int64_t channels) = 0;

  // out = a + b (elementwise, act dtype). out may alias a.
  virtual void add(Tensor out, Tensor a, Tensor b, int64_t n) = 0;

  // GELU, tanh approximation. backward: dx = dout * gelu'(x) (written).
  virtual void gelu_forward(Tensor out, Tensor x, int64_t n) = 0;
  virtual void gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) = 0;

  // Inverted dropout in place: x *= mask / (1 - p), the mask a pure function of the key and the
  // element's (sequence, index) (DropoutKey), so forward, backward and recompute see the same
  // mask, and so does any split of the global batch.
  virtual void dropout(Tensor x, int64_t n, double p, const DropoutKey& key) = 0;

  // ---- fused ops ----------------------------------------------------------------------------
  // Each is exactly the composition of the ops its default implementation calls (same results);
  // a backend overrides it to do the work in fewer passes over memory and fewer launches.

  // The residual add and the layernorm after it: sum = a + b ([rows, C], act dtype; sum may
  // alias a), then layernorm_forward(out, mean, rstd, sum, weight, bias, rows, C).
  virtual void add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd, Tensor a,
                                     Tensor b, Tensor weight, Tensor bias, int64_t rows,
                                     int64_t channels) {
    add(sum, a, b, rows * channels);
    layernorm_forward(out, mean, rstd, sum, weight, bias, rows, channels);
  }

  // GELU's backward and the bias gradient of the linear layer before it: dx = dout * gelu'(x)
  // ([rows, C] written; dx may alias dout), then bias_backward(dbias, dx, rows, C) (dbias += the
  // column sums of dx).
  virtual void gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout, int64_t rows,
                                  int64_t channels) {
    gelu_backward(dx, x, dout, rows * channels);
    bias_backward(dbias, dx, rows, channels);
  }

  // qkv: [B, T, 3C] (q | k | v, head h at columns h*hd..; with args.kv_heads, qkv_width()),
  // out: [B, T, C], lse: [B, H, T].
  virtual void attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) = 0;
  // dqkv written; needs the forward's out and lse.
  virtual void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                                  const AttentionArgs& args) = 0;

  // One query row per head against a KV cache (incremental decoding): q [C] (head h at columns
  // h*hd ..), k_cache and v_cache [positions, C] with rows `stride` elements apart; out [C] =
  // softmax(q . k / sqrt(hd)) v over the first `positions` rows, per head. fp32.
  virtual void attention_decode(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache,
                                int64_t positions, int64_t heads, int64_t channels,
                                int64_t stride) = 0;

  // Softmax cross-entropy over the first `vocab` of `padded_vocab` columns (padding gets no
  // mass). losses[r] = -log p[r, targets[r]] (targets int32 [rows]). If `grad_scale` != 0, the
  // logits are overwritten in place with dlogits = grad_scale * (softmax - onehot) (padding
  // columns get 0).
  virtual void softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets, int64_t rows,
                                     int64_t vocab, int64_t padded_vocab, double grad_scale) = 0;

  // ---- MLP variants and the logit soft-cap (model.mlp, model.logit_softcap) ------------------
  // No composition of the ops above gives these: every backend implements them.

  // ReLU squared (model.mlp = relu2): out = max(x, 0)^2; backward dx = dout * 2 max(x, 0)
  // (written; dx may alias dout).
  virtual void relu2_forward(Tensor out, Tensor x, int64_t n) = 0;
  virtual void relu2_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) = 0;
  // SwiGLU's gated product (model.mlp = swiglu): out = silu(gate) * up, silu(g) = g sigmoid(g).
  // backward: dgate = dout * up * silu'(gate), dup = dout * silu(gate) (both written; dgate may
  // alias dout).
  virtual void swiglu_forward(Tensor out, Tensor gate, Tensor up, int64_t n) = 0;
  virtual void swiglu_backward(Tensor dgate, Tensor dup, Tensor gate, Tensor up, Tensor dout,
                               int64_t n) = 0;
  // The logit soft-cap: y = cap * tanh(x / cap) (cap > 0; y may alias x).
  virtual void softcap_forward(Tensor y, Tensor x, int64_t n, double cap) = 0;
  // softmax_cross_entropy over soft-capped logits: `logits` holds y = softcap_forward(x), the
  // losses are those of y, and with grad_scale != 0 the logits are overwritten with the gradient
  // with respect to x: grad_scale * (softmax(y) - onehot) * (1 - (y / cap)^2) (padding 0). One
  // pass: the cap's derivative needs y, which the plain op's gradient overwrites.
  virtual void softcap_cross_entropy(Tensor losses, Tensor logits, Tensor targets, int64_t rows,
                                     int64_t vocab, int64_t padded_vocab, double grad_scale,
                                     double cap) = 0;
  // ---- rotary positions and QK-norm (model.position = rope, model.qk_norm) --------------------
  // Both act in place on `heads` heads of head_dim columns each at the start of rows `stride`
  // elements apart (the q heads then the k heads of a fused qkv row), act dtype (fp32, fp64).

  // Rotary embedding, Hugging Face Llama's half-split convention: in each head, element i <
  // head_dim/2 pairs with i + head_dim/2, (a, b) -> (a cos - b sin, b cos + a sin) with angle
  // pos * theta^(-2i/head_dim), pos = pos0 + r % seq for row r (angles in double, rounded once).
  // inverse: rotation by -angle, the transpose (the backward).
  virtual void rope(Tensor x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads,
                    int64_t head_dim, int64_t stride, double theta, bool inverse) = 0;
  // Weightless RMS norm of each head: x *= rstd, rstd = 1 / sqrt(mean(x^2) + eps) over its
  // head_dim, written to rstd [rows, heads].
  virtual void head_rmsnorm_forward(Tensor x, Tensor rstd, int64_t rows, int64_t heads,
                                    int64_t head_dim, int64_t stride, double eps) = 0;
  // Its backward in place: dx = rstd * (dx - y * mean(dx * y)) per head, y the forward's output
  // (any rotation of y and dx applied alike gives the rotated result: the rotation keeps dot
  // products).
  virtual void head_rmsnorm_backward(Tensor dx, Tensor y, Tensor rstd, int64_t rows, int64_t heads,
                                     int64_t head_dim, int64_t stride) = 0;
  // ---- model.norm: RMSNorm, weightless and bias-free norms, any eps -------------
  // out = xhat * weight + bias (NormArgs) over the last dim of x [rows, C]; weight and bias may
  // be empty (none: 1 and 0). rstd [rows] is saved, and mean [rows] for LayerNorm (RMSNorm
  // leaves it alone: it may be empty). LayerNorm with weight, bias and eps 1e-5 is exactly
  // layernorm_forward.
  virtual void norm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                            Tensor bias, const NormArgs& args) = 0;
  // dx += ...; dweight += sum dout * xhat and dbias += sum dout when they are not empty (a
  // weightless norm, or one whose weight is frozen and not sunk, has none).
  virtual void norm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                             Tensor weight, Tensor mean, Tensor rstd, const NormArgs& args) = 0;

  // ---- optimizer ----------------------------------------------------------------------------
  // One optimizer kernel (optim_op.h); kinds that reduce write their partial sums to `sums`
  // (host memory, at most 2 values), the others leave it alone.
  virtual void optimizer_op(const OptimOp& op, double* sums) = 0;
  // Element-wise kernels over distinct tensors (optim_op_elementwise kinds, e.g. one stage of an
  // optimizer over every parameter): the results are those of one optimizer_op per entry, in any
  // order. The default runs them in turn; a backend may run them together (the CPU backend: one
  // parallel region over all of them instead of one per tensor).
  virtual void optimizer_ops(const OptimOp* ops, int64_t count);

 protected:
  // Implementations count what they move (transfers()).
  void note_up(int64_t bytes) {
    ++transfers_.up_calls;
    transfers_.up_bytes += bytes;
  }
  void note_down(int64_t bytes) {
    ++transfers_.down_calls;
    transfers_.down_bytes += bytes;
  }

 private:
  TransferStats transfers_;
};

// Backends by name (backend_create) live a room above every backend:
// model/backends/backend_factory.h.

// The CPU backend with `threads` OpenMP threads (0: all cores / ranks on this node).
std::unique_ptr<Backend> backend_create_cpu(int threads = 0);

}  // namespace ledgerlm
