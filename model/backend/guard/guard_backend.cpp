// The guard backend (see guard_backend.h): a decorator over the CPU backend whose allocator maps
// every buffer PROT_NONE and opens all of them for the duration of each backend call.
#include "model/backend/guard/guard_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "model/backend/optim/optim_op.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

class GuardAllocator final : public Allocator {
 public:
  MemSpace space() const override { return MemSpace::kDevice; }

  void* allocate(size_t bytes) override {
    const size_t len = round_to_pages(bytes);
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;  // anonymous mappings are zero-filled
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[p] = len;
    if (open_ == 0) protect(p, len, PROT_NONE);
    return p;
  }

  void deallocate(void* data, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_.erase(data);
    ::munmap(data, round_to_pages(bytes));
  }

  // Opens every buffer for reading and writing while a backend call runs (nested calls count).
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_++ == 0)
      for (const auto& [p, len] : regions_) protect(p, len, PROT_READ | PROT_WRITE);
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--open_ == 0)
      for (const auto& [p, len] : regions_) protect(p, len, PROT_NONE);
  }

 private:
  static size_t round_to_pages(size_t bytes) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  }
  static void protect(void* p, size_t len, int prot) {
    LLM_REQUIRE(::mprotect(p, len, prot) == 0, "guard backend: mprotect failed");
  }

  std::mutex mutex_;
  std::map<void*, size_t> regions_;
  int open_ = 0;
};

class GuardBackend final : public Backend {
 public:
  explicit GuardBackend(int threads) : inner_(backend_create_cpu(threads)) {}

  // Every call to the inner backend runs with the buffers open.
  struct Open {
    explicit Open(GuardAllocator& a) : a_(a) { a_.open(); }
    ~Open() { a_.close(); }
    GuardAllocator& a_;
  };

  std::string name() const override { return "guard"; }
  int num_threads() const override { return inner_->num_threads(); }
  MemoryTracker& tracker() override { return inner_->tracker(); }
  MemSpace memory_space() const override { return MemSpace::kDevice; }
  Buffer allocate(MemTag tag, size_t bytes) override {
    return Buffer(&alloc_, &inner_->tracker(), tag, bytes);
  }
  void copy_from_host(Tensor dst, const void* src, int64_t n) override {
    Open o(alloc_);
    inner_->copy_from_host(dst, src, n);
  }
  void copy_to_host(void* dst, Tensor src, int64_t n) override {
    Open o(alloc_);
    inner_->copy_to_host(dst, src, n);
  }
  void copy(Tensor dst, Tensor src, int64_t n) override {
    Open o(alloc_);
    inner_->copy(dst, src, n);
  }
  void zero(Tensor t, int64_t n) override {
    Open o(alloc_);
    inner_->zero(t, n);
  }
  void convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
               uint64_t stream_offset) override {
    Open o(alloc_);
    inner_->convert(dst, src, n, rounding, seed, stream_offset);
  }
  void accumulate(Tensor dst, Tensor src, int64_t n) override {
    Open o(alloc_);
    inner_->accumulate(dst, src, n);
  }
  double sum_squares(Tensor x, int64_t n) override {
    Open o(alloc_);
    return inner_->sum_squares(x, n);
  }
  bool all_finite(Tensor x, int64_t n) override {
    Open o(alloc_);
    return inner_->all_finite(x, n);
  }
  void scale(Tensor x, int64_t n, double s) override {
    Open o(alloc_);
    inner_->scale(x, n, s);
  }
  void gemm(const GemmArgs& args) override {
    Open o(alloc_);
    inner_->gemm(args);
  }
  void bias_backward(Tensor dbias, Tensor dout, int64_t m, int64_t n) override {
    Open o(alloc_);
    inner_->bias_backward(dbias, dout, m, n);
  }
  void embedding_forward(Tensor out, Tensor tokens, Tensor wte, Tensor wpe, int64_t batch,
                         int64_t seq, int64_t channels) override {
    Open o(alloc_);
    inner_->embedding_forward(out, tokens, wte, wpe, batch, seq, channels);
  }
  void embedding_backward(Tensor dwte, Tensor dwpe, Tensor dout, Tensor tokens, int64_t batch,
                          int64_t seq, int64_t channels) override {
    Open o(alloc_);
    inner_->embedding_backward(dwte, dwpe, dout, tokens, batch, seq, channels);
  }
  void layernorm_forward(Tensor out, Tensor mean, Tensor rstd, Tensor x, Tensor weight, Tensor bias,
                         int64_t rows, int64_t channels) override {
    Open o(alloc_);
    inner_->layernorm_forward(out, mean, rstd, x, weight, bias, rows, channels);
  }
  void layernorm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x,
                          Tensor weight, Tensor mean, Tensor rstd, int64_t rows,
                          int64_t channels) override {
    Open o(alloc_);
    inner_->layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, rows, channels);
  }
  void add_layernorm_forward(Tensor sum, Tensor out, Tensor mean, Tensor rstd, Tensor a, Tensor b,
                             Tensor weight, Tensor bias, int64_t rows, int64_t channels) override {
    Open o(alloc_);
    inner_->add_layernorm_forward(sum, out, mean, rstd, a, b, weight, bias, rows, channels);
  }
  void gelu_bias_backward(Tensor dx, Tensor dbias, Tensor x, Tensor dout, int64_t rows,
                          int64_t channels) override {
    Open o(alloc_);
    inner_->gelu_bias_backward(dx, dbias, x, dout, rows, channels);
  }
  void add(Tensor out, Tensor a, Tensor b, int64_t n) override {
    Open o(alloc_);
    inner_->add(out, a, b, n);
  }
  void gelu_forward(Tensor out, Tensor x, int64_t n) override {
    Open o(alloc_);
    inner_->gelu_forward(out, x, n);
  }
  void gelu_backward(Tensor dx, Tensor x, Tensor dout, int64_t n) override {
    Open o(alloc_);
    inner_->gelu_backward(dx, x, dout, n);
  }
  void dropout(Tensor x, int64_t n, double p, const DropoutKey& key) override {
    Open o(alloc_);
    inner_->dropout(x, n, p, key);
  }
  void attention_forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) override {
    Open o(alloc_);
    inner_->attention_forward(out, lse, qkv, args);
  }
  void attention_backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                          const AttentionArgs& args) override {
    Open o(alloc_);
    inner_->attention_backward(dqkv, dout, qkv, out, lse, args);
  }
  void softmax_cross_entropy(Tensor losses, Tensor logits, Tensor targets, int64_t rows,
                             int64_t vocab, int64_t padded_vocab, double grad_scale) override {
    Open o(alloc_);
    inner_->softmax_cross_entropy(losses, logits, targets, rows, vocab, padded_vocab, grad_scale);
  }
  void attention_decode(Tensor out, Tensor q, Tensor k_cache, Tensor v_cache, int64_t positions,
                        int64_t heads, int64_t channels, int64_t stride) override {
    Open o(alloc_);
    inner_->attention_decode(out, q, k_cache, v_cache, positions, heads, channels, stride);
  }
  double sum(Tensor x, int64_t n) override {
    Open o(alloc_);
    return inner_->sum(x, n);
  }
  const TransferStats& transfers() const override { return inner_->transfers(); }
  void reset_transfers() override { inner_->reset_transfers(); }
  void optimizer_op(const OptimOp& op, double* sums) override {
    Open o(alloc_);
    inner_->optimizer_op(op, sums);
  }
  void optimizer_ops(const OptimOp* ops, int64_t count) override {
    Open o(alloc_);
    inner_->optimizer_ops(ops, count);
  }

 private:
  GuardAllocator alloc_;
  std::unique_ptr<Backend> inner_;
};

}  // namespace

std::unique_ptr<Backend> backend_create_guard(int threads) {
  return std::make_unique<GuardBackend>(threads);
}

}  // namespace ledgerlm
