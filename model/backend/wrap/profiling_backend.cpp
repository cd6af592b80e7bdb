// Per-op timing decorator (see profiling_backend.h).
#include "model/backend/wrap/profiling_backend.h"

#include <chrono>

namespace ledgerlm {
namespace {

class Timer {
 public:
  Timer(std::map<std::string, OpTime>& times, const char* name)
      : slot_(times[name]), t0_(std::chrono::steady_clock::now()) {}
  ~Timer() {
    slot_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    ++slot_.calls;
  }

 private:
  OpTime& slot_;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace

void ProfilingBackend::copy_from_host(Tensor dst, const void* src, int64_t n) {
  Timer tm(times_, "copy_from_host");
  inner_->copy_from_host(dst, src, n);
}
void ProfilingBackend::copy_to_host(void* dst, Tensor src, int64_t n) {
  Timer tm(times_, "copy_to_host");
  inner_->copy_to_host(dst, src, n);
}
void ProfilingBackend::copy(Tensor dst, Tensor src, int64_t n) {
  Timer tm(times_, "copy");
  inner_->copy(dst, src, n);
}
void ProfilingBackend::zero(Tensor t, int64_t n) {
  Timer tm(times_, "zero");
  inner_->zero(t, n);
}
void ProfilingBackend::convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
                               uint64_t stream_offset) {
  Timer tm(times_, "convert");
  inner_->convert(dst, src, n, rounding, seed, stream_offset);
}
void ProfilingBackend::accumulate(Tensor dst, Tensor src, int64_t n) {
  Timer tm(times_, "accumulate");
  inner_->accumulate(dst, src, n);
}
double ProfilingBackend::sum_squares(Tensor x, int64_t n) {
  Timer tm(times_, "sum_squares");
  return inner_->sum_squares(x, n);
}
bool ProfilingBackend::all_finite(Tensor x, int64_t n) {
  Timer tm(times_, "all_finite");
  return inner_->all_finite(x, n);
}
void ProfilingBackend::scale(Tensor x, int64_t n, double s) {
  Timer tm(times_, "scale");
  inner_->scale(x, n, s);
}
void ProfilingBackend::gemm(const GemmArgs& args) {
  std::string key = std::string(args.trans_a ? "T" : "N") + (args.trans_b ? "T " : "N ") +
                    std::to_string(args.m) + "x" + std::to_string(args.n) + "x" +
                    std::to_string(args.k) + (args.bias.empty() ? "" : " +bias") +
                    (args.accumulate ? " +=C" : "");
  OpTime& shape = gemm_times_[key];
  const auto t0 = std::chrono::steady_clock::now();
  {
    Timer tm(times_, "gemm");
    inner_->gemm(args);
  }
  shape.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  shape.calls += 1;
  shape.shape = args;
  shape.flops +=
      2.0 * static_cast<double>(args.m) * static_cast<double>(args.n) * static_cast<double>(args.k);
}
void ProfilingBackend::bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) {
  Timer tm(times_, "bias_backward");
  inner_->bias_backward(dbias, dout, m, n);
}
void ProfilingBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe,
                                         int64_t batch, int64_t seq, int64_t channels) {
  Timer tm(times_, "embedding_forward");
  inner_->embedding_forward(out, tokens, wte, wpe, batch, seq, channels);
}
void ProfilingBackend::embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens,
                                          int64_t batch, int64_t seq, int64_t channels) {
  Timer tm(times_, "embedding_backward");
  inner_->embedding_backward(dwte, dwpe, dout, tokens, batch, seq, channels);
}
void ProfilingBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x,
                                         Tensor weight, Tensor bias, int64_t rows,
                                         int64_t channels) {
  Timer tm(times_, "layernorm_forward");
  inner_->layernorm_forward(out, mean, rstd, x, weight, bias, rows, channels);
}
void ProfilingBackend::layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout,
                                          Tensor x, Tensor weight, Tensor mean, Tensor rstd,
                                          int64_t rows, int64_t channels) {
  Timer tm(times_, "layernorm_backward");
  inner_->layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, rows, channels);
}
void ProfilingBackend::add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd,
                                             Tensor a, Tensor b, Tensor weight, Tensor bias,
                                             int64_t rows, int64_t channels) {
  Timer tm(times_, "add_layernorm_forward");
  inner_->add_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, rows, channels);
}
void ProfilingBackend::gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout,
                                          int64_t rows, int64_t channels) {
  Timer tm(times_, "gelu_bias_backward");
  inner_->gelu_bias_backward(dx, dbias, x, dout, rows, channels);
}
void ProfilingBackend::add(Tensor out, Tensor a, Tensor b, int64_t n) {
  Timer tm(times_, "add");
  inner_->add(out, a, b, n);
}
void ProfilingBackend::gelu_forward(Tensor out, Tensor x, int64_t n) {
  Timer tm(times_, "gelu_forward");
  inner_->gelu_forward(out, x, n);
}
void ProfilingBackend::gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  Timer tm(times_, "gelu_backward");
  inner_->gelu_backward(dx, x, dout, n);
}
void ProfilingBackend::dropout(Tensor x, int64_t n, double p, const DropoutKey& key) {
  Timer tm(times_, "dropout");
  inner_->dropout(x, n, p, key);
}
void ProfilingBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv,
                                         const AttentionArgs& args) {
  Timer tm(times_, "attention_forward");
  inner_->attention_forward(out, lse, qkv, args);
}
void ProfilingBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out,
                                          Tensor lse, const AttentionArgs& args) {
  Timer tm(times_, "attention_backward");
  inner_->attention_backward(dqkv, dout, qkv, out, lse, args);
}
void ProfilingBackend::softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets,
                                             int64_t rows, int64_t vocab, int64_t padded_vocab,
                                             double grad_scale) {
  Timer tm(times_, "softmax_cross_entropy");
  inner_->softmax_cross_entropy(losses, logits, targets, rows, vocab, padded_vocab, grad_scale);
}

void ProfilingBackend::attention_decode(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache,
                                        int64_t positions, int64_t heads, int64_t channels,
                                        int64_t stride) {
  Timer tm(times_, "attention_decode");
  inner_->attention_decode(out, q, k_cache, v_cache, positions, heads, channels, stride);
}
double ProfilingBackend::sum(Tensor x, int64_t n) {
  Timer tm(times_, "sum");
  return inner_->sum(x, n);
}
void ProfilingBackend::optimizer_op(const OptimOp& op, double* sums) {
  Timer tm(times_, "optimizer");
  inner_->optimizer_op(op, sums);
}
void ProfilingBackend::optimizer_ops(const OptimOp* ops, int64_t count) {
  Timer tm(times_, "optimizer");
  inner_->optimizer_ops(ops, count);
}

}  // namespace ledgerlm
