// ForwardingBackend (see forwarding_backend.h): each method hands its arguments to the inner
// backend unchanged; the ops between op_begin and op_end.
#include "model/backend/wrap/forwarding_backend.h"

#include <utility>

#include "model/base/check.h"

namespace ledgerlm {

class ForwardingBackend::Op {
 public:
  Op(ForwardingBackend& be, const char* name) : be_(be), name_(name) { be_.op_begin(name_); }
  // May throw: a wrapper's op_end may wait for the device, which reports an asynchronous error
  // of the op there (op_end itself stays quiet while an exception is already in flight).
  ~Op() noexcept(false) { be_.op_end(name_); }
  Op(const Op&) = delete;
  Op& operator=(const Op&) = delete;

 private:
  ForwardingBackend& be_;
  const char* name_;
};

ForwardingBackend::ForwardingBackend(std::unique_ptr<Backend> inner)
    : owned_(std::move(inner)), inner_(owned_.get()) {
  LLM_REQUIRE(inner_ != nullptr, "a forwarding backend needs a backend to forward to");
}
ForwardingBackend::ForwardingBackend(Backend& inner) : inner_(&inner) {}
ForwardingBackend::~ForwardingBackend() = default;

const TransferStats& ForwardingBackend::transfers() const {
  return inner_->transfers();
}
void ForwardingBackend::reset_transfers() {
  inner_->reset_transfers();
}
std::string ForwardingBackend::name() const {
  return inner_->name();
}
std::string ForwardingBackend::device_name() const {
  return inner_->device_name();
}
void ForwardingBackend::synchronize() {
  inner_->synchronize();
}
int ForwardingBackend::num_threads() const {
  return inner_->num_threads();
}
MemoryTracker& ForwardingBackend::tracker() {
  return inner_->tracker();
}
MemSpace ForwardingBackend::memory_space() const {
  return inner_->memory_space();
}
bool ForwardingBackend::device_memory(DeviceMemoryInfo* info) {
  return inner_->device_memory(info);
}
void* ForwardingBackend::native_stream() {
  return inner_->native_stream();
}
Buffer ForwardingBackend::allocate(MemTag tag, size_t bytes) {
  return inner_->allocate(tag, bytes);
}

void ForwardingBackend::copy_from_host(Tensor dst, const void* src, int64_t n) {
  Op op(*this, "copy_from_host");
  inner_->copy_from_host(dst, src, n);
}
void ForwardingBackend::copy_to_host(void* dst, Tensor src, int64_t n) {
  Op op(*this, "copy_to_host");
  inner_->copy_to_host(dst, src, n);
}
void ForwardingBackend::copy(Tensor dst, Tensor src, int64_t n) {
  Op op(*this, "copy");
  inner_->copy(dst, src, n);
}
void ForwardingBackend::zero(Tensor t, int64_t n) {
  Op op(*this, "zero");
  inner_->zero(t, n);
}
void ForwardingBackend::convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
                                uint64_t stream_offset) {
  Op op(*this, "convert");
  inner_->convert(dst, src, n, rounding, seed, stream_offset);
}
void ForwardingBackend::accumulate(Tensor dst, Tensor src, int64_t n) {
  Op op(*this, "accumulate");
  inner_->accumulate(dst, src, n);
}
double ForwardingBackend::sum(Tensor x, int64_t n) {
  Op op(*this, "sum");
  return inner_->sum(x, n);
}
double ForwardingBackend::sum_squares(Tensor x, int64_t n) {
  Op op(*this, "sum_squares");
  return inner_->sum_squares(x, n);
}
double ForwardingBackend::sum_squares_fold(Tensor x, Tensor y, int64_t n, SquaresFold fold) {
  Op op(*this, "sum_squares_fold");
  return inner_->sum_squares_fold(x, y, n, fold);
}
bool ForwardingBackend::all_finite(Tensor x, int64_t n) {
  Op op(*this, "all_finite");
  return inner_->all_finite(x, n);
}
void ForwardingBackend::scale(Tensor x, int64_t n, double s) {
  Op op(*this, "scale");
  inner_->scale(x, n, s);
}

void ForwardingBackend::gemm(const GemmArgs& args) {
  Op op(*this, "gemm");
  inner_->gemm(args);
}
void ForwardingBackend::bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) {
  Op op(*this, "bias_backward");
  inner_->bias_backward(dbias, dout, m, n);
}
void ForwardingBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe,
                                          int64_t batch, int64_t seq, int64_t channels) {
  Op op(*this, "embedding_forward");
  inner_->embedding_forward(out, tokens, wte, wpe, batch, seq, channels);
}
void ForwardingBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens,
                                           int64_t batch, int64_t seq, int64_t channels) {
  Op op(*this, "embedding_backward");
  inner_->embedding_backward(dwte, dwpe, dout, tokens, batch, seq, channels);
}
void ForwardingBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x,
                                          Tensor weight, Tensor bias, int64_t rows,
                                          int64_t channels) {
  Op op(*this, "layernorm_forward");
  inner_->layernorm_forward(out, mean, rstd, x, weight, bias, rows, channels);
}
void ForwardingBackend::layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout,
                                           Tensor x, Tensor weight, Tensor mean, Tensor rstd,
                                           int64_t rows, int64_t channels) {
  Op op(*this, "layernorm_backward");
  inner_->layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, rows, channels);
}
// model.norm
void ForwardingBackend::norm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight,
                                     Tensor bias, const NormArgs& args) {
  Op op(*this, "norm_forward");
  inner_->norm_forward(out, mean, rstd, x, weight, bias, args);
}
void ForwardingBackend::norm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout,
                                      Tensor x, Tensor weight, Tensor mean, Tensor rstd,
                                      const NormArgs& args) {
  Op op(*this, "norm_backward");
  inner_->norm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, args);
}
void ForwardingBackend::add(Tensor out, Tensor a, Tensor b, int64_t n) {
  Op op(*this, "add");
  inner_->add(out, a, b, n);
}
void ForwardingBackend::gelu_forward(Tensor out, Tensor x, int64_t n) {
  Op op(*this, "gelu_forward");
  inner_->gelu_forward(out, x, n);
}
void ForwardingBackend::gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  Op op(*this, "gelu_backward");
  inner_->gelu_backward(dx, x, dout, n);
}
void ForwardingBackend::dropout(Tensor x, int64_t n, double p, const DropoutKey& key) {
  Op op(*this, "dropout");
  inner_->dropout(x, n, p, key);
}
void ForwardingBackend::add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd,
                                              Tensor a, Tensor b, Tensor weight, Tensor bias,
                                              int64_t rows, int64_t channels) {
  Op op(*this, "add_layernorm_forward");
  inner_->add_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, rows, channels);
}
void ForwardingBackend::gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout,
                                           int64_t rows, int64_t channels) {
  Op op(*this, "gelu_bias_backward");
  inner_->gelu_bias_backward(dx, dbias, x, dout, rows, channels);
}
void ForwardingBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv,
                                          const AttentionArgs& args) {
  Op op(*this, "attention_forward");
  inner_->attention_forward(out, lse, qkv, args);
}
void ForwardingBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out,
                                           Tensor lse, const AttentionArgs& args) {
  Op op(*this, "attention_backward");
  inner_->attention_backward(dqkv, dout, qkv, out, lse, args);
}
void ForwardingBackend::attention_decode(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache,
                                         int64_t positions, int64_t heads, int64_t channels,
                                         int64_t stride) {
  Op op(*this, "attention_decode");
  inner_->attention_decode(out, q, k_cache, v_cache, positions, heads, channels, stride);
}
void ForwardingBackend::softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets,
                                              int64_t rows, int64_t vocab, int64_t padded_vocab,
                                              double grad_scale) {
  Op op(*this, "softmax_cross_entropy");
  inner_->softmax_cross_entropy(losses, logits, targets, rows, vocab, padded_vocab, grad_scale);
}

// MLP variants and the logit soft-cap (model.mlp, model.logit_softcap).
void ForwardingBackend::relu2_forward(Tensor out, Tensor x, int64_t n) {
  Op op(*this, "relu2_forward");
  inner_->relu2_forward(out, x, n);
}
void ForwardingBackend::relu2_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  Op op(*this, "relu2_backward");
  inner_->relu2_backward(dx, x, dout, n);
}
void ForwardingBackend::swiglu_forward(Tensor out, Tensor gate, Tensor up, int64_t n) {
  Op op(*this, "swiglu_forward");
  inner_->swiglu_forward(out, gate, up, n);
}
void ForwardingBackend::swiglu_backward(Tensor dgate, Tensor dup, Tensor gate, Tensor up,
                                        Tensor dout, int64_t n) {
  Op op(*this, "swiglu_backward");
  inner_->swiglu_backward(dgate, dup, gate, up, dout, n);
}
void ForwardingBackend::softcap_forward(Tensor y, Tensor x, int64_t n, double cap) {
  Op op(*this, "softcap_forward");
  inner_->softcap_forward(y, x, n, cap);
}
void ForwardingBackend::softcap_cross_entropy(Tensor losses, Tensor logits, Tensor targets,
                                              int64_t rows, int64_t vocab, int64_t padded_vocab,
                                              double grad_scale, double cap) {
  Op op(*this, "softcap_cross_entropy");
  inner_->softcap_cross_entropy(losses, logits, targets, rows, vocab, padded_vocab, grad_scale,
                                cap);
}
// Rotary positions and QK-norm (model.position = rope, model.qk_norm).
void ForwardingBackend::rope(Tensor x, int64_t rows, int64_t seq, int64_t pos0, int64_t heads,
                             int64_t head_dim, int64_t stride, double theta, bool inverse) {
  Op op(*this, "rope");
  inner_->rope(x, rows, seq, pos0, heads, head_dim, stride, theta, inverse);
}
void ForwardingBackend::head_rmsnorm_forward(Tensor x, Tensor rstd, int64_t rows, int64_t heads,
                                             int64_t head_dim, int64_t stride, double eps) {
  Op op(*this, "head_rmsnorm_forward");
  inner_->head_rmsnorm_forward(x, rstd, rows, heads, head_dim, stride, eps);
}
void ForwardingBackend::head_rmsnorm_backward(Tensor dx, Tensor y, Tensor rstd, int64_t rows,
                                              int64_t heads, int64_t head_dim, int64_t stride) {
  Op op(*this, "head_rmsnorm_backward");
  inner_->head_rmsnorm_backward(dx, y, rstd, rows, heads, head_dim, stride);
}

void ForwardingBackend::optimizer_op(const OptimOp& op, double* sums) {
  Op scope(*this, "optimizer_op");
  inner_->optimizer_op(op, sums);
}
void ForwardingBackend::optimizer_ops(const OptimOp* ops, int64_t count) {
  Op scope(*this, "optimizer_ops");
  inner_->optimizer_ops(ops, count);
}

}  // namespace ledgerlm
