// Subnormal counts per op output (see subnormal_count_backend.h).
#include "model/backend/wrap/subnormal_count_backend.h"

#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

namespace ledgerlm {
namespace {

// By bit pattern (exponent field 0, mantissa not): a float comparison would read a subnormal as
// 0 on a thread with DAZ on.
template <class Bits, int kMantissa>
int64_t count_subnormal_bits(const std::vector<unsigned char>& bytes) {
  const size_t n = bytes.size() / sizeof(Bits);
  const Bits mantissa = (Bits{1} << kMantissa) - 1;
  const Bits exponent = ~mantissa & ~(Bits{1} << (sizeof(Bits) * 8 - 1));
  int64_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    Bits b;
    std::memcpy(&b, bytes.data() + i * sizeof(Bits), sizeof(Bits));
    c += (b & exponent) == 0 && (b & mantissa) != 0;
  }
  return c;
}

}  // namespace

SubnormalCountBackend::SubnormalCountBackend(std::unique_ptr<Backend> inner,
                                             bool print_when_destroyed)
    : ForwardingBackend(std::move(inner)), print_when_destroyed_(print_when_destroyed) {}

SubnormalCountBackend::~SubnormalCountBackend() {
  if (print_when_destroyed_) std::fputs(table().c_str(), stderr);
}

std::string SubnormalCountBackend::table() const {
  std::string out = "subnormals by op output (count of elements, fraction)\n";
  for (const auto& [what, c] : counts_) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-28s %14lld of %14lld (%.3g)\n", what.c_str(),
                  static_cast<long long>(c.subnormal), static_cast<long long>(c.total),
                  c.total ? static_cast<double>(c.subnormal) / static_cast<double>(c.total) : 0.0);
    out += line;
  }
  return out;
}

void SubnormalCountBackend::count(const char* what, Tensor t, int64_t n) {
  if (t.empty() || n <= 0 || (t.dtype != DType::kF32 && t.dtype != DType::kF64)) return;
  std::vector<unsigned char> host(static_cast<size_t>(n) * dtype_size(t.dtype));
  inner().copy_to_host(host.data(), t, n);
  SubnormalCount& slot = counts_[what];
  slot.subnormal += t.dtype == DType::kF32 ? count_subnormal_bits<uint32_t, 23>(host)
                                           : count_subnormal_bits<uint64_t, 52>(host);
  slot.total += n;
}

void SubnormalCountBackend::gemm(const GemmArgs& a) {
  count("gemm.a", a.a, a.m * a.k);
  count("gemm.b", a.b, a.k * a.n);
  ForwardingBackend::gemm(a);
  count("gemm.c", a.c, a.m * a.n);
}
void SubnormalCountBackend::embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe,
                                              int64_t batch, int64_t seq, int64_t channels) {
  ForwardingBackend::embedding_forward(out, tokens, wte, wpe, batch, seq, channels);
  count("embedding_forward.out", out, batch * seq * channels);
}
void SubnormalCountBackend::layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x,
                                              Tensor weight, Tensor bias, int64_t rows,
                                              int64_t channels) {
  ForwardingBackend::layernorm_forward(out, mean, rstd, x, weight, bias, rows, channels);
  count("layernorm_forward.out", out, rows * channels);
}
void SubnormalCountBackend::layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout,
                                               Tensor x, Tensor weight, Tensor mean, Tensor rstd,
                                               int64_t rows, int64_t channels) {
  ForwardingBackend::layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, rows,
                                        channels);
  count("layernorm_backward.dx", dx, rows * channels);
}
void SubnormalCountBackend::add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd,
                                                  Tensor a, Tensor b, Tensor weight, Tensor bias,
                                                  int64_t rows, int64_t channels) {
  ForwardingBackend::add_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, rows,
                                           channels);
  count("add_layernorm_forward.sum", sum, rows * channels);
  count("add_layernorm_forward.out", out, rows * channels);
}
void SubnormalCountBackend::gelu_forward(Tensor out, Tensor x, int64_t n) {
  ForwardingBackend::gelu_forward(out, x, n);
  count("gelu_forward.out", out, n);
}
void SubnormalCountBackend::gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) {
  ForwardingBackend::gelu_backward(dx, x, dout, n);
  count("gelu_backward.dx", dx, n);
}
void SubnormalCountBackend::gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout,
                                               int64_t rows, int64_t channels) {
  ForwardingBackend::gelu_bias_backward(dx, dbias, x, dout, rows, channels);
  count("gelu_bias_backward.dx", dx, rows * channels);
}
void SubnormalCountBackend::attention_forward(Tensor out, Tensor lse, Tensor qkv,
                                              const AttentionArgs& args) {
  ForwardingBackend::attention_forward(out, lse, qkv, args);
  count("attention_forward.out", out, args.batch * args.seq * args.channels);
}
void SubnormalCountBackend::attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out,
                                               Tensor lse, const AttentionArgs& args) {
  ForwardingBackend::attention_backward(dqkv, dout, qkv, out, lse, args);
  count("attention_backward.dqkv", dqkv, args.batch * args.seq * 3 * args.channels);
}
void SubnormalCountBackend::softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets,
                                                  int64_t rows, int64_t vocab, int64_t padded_vocab,
                                                  double grad_scale) {
  ForwardingBackend::softmax_cross_entropy(losses, logits, targets, rows, vocab, padded_vocab,
                                           grad_scale);
  if (grad_scale != 0) count("softmax_cross_entropy.dlogits", logits, rows * padded_vocab);
}

}  // namespace ledgerlm
