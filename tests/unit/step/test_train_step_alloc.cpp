// No per-step heap allocations in the model and the backend: after two warm-up steps (buffers
// planned, workspaces grown), a micro-batch's forward and backward allocate nothing through
// operator new, for fp32, bf16 and fp16 params, with and without dropout. This executable counts
// operator new calls with a replacement operator new. The optimizer step (update and compute-copy
// write) makes a handful of small allocations (per-segment step constants); the test holds their
// number fixed from step to step, so nothing grows with the run. (The data loader builds a vector
// of window indices per batch, not counted here.
// oneDNN's primitive execution builds a small argument map inside the library on every call, so
// the GEMMs run on OpenBLAS here: the test is about this project's code.)
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "tests/support/train_test_support.h"
#include "train/step/model_state.h"
#include "train/step/train_step.h"

namespace {
std::atomic<int64_t> g_news{0};
}  // namespace

void* operator new(std::size_t n) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
// The nothrow and array forms too: every non-aligned allocation then comes from malloc and goes
// back through free (a nothrow new left to the runtime, freed by the delete above, is a
// mismatch AddressSanitizer reports).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  g_news.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(n == 0 ? 1 : n);
}
void* operator new[](std::size_t n) {
  return operator new(n);
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
  return operator new(n, tag);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}

namespace ledgerlm {
namespace {

// Fixed token rows, filled once.
class FixedBatches final : public BatchSource {
 public:
  FixedBatches(int64_t B, int64_t T, int64_t vocab)
      : in_(static_cast<size_t>(B * T)), tg_(in_.size()) {
    for (size_t i = 0; i < in_.size(); ++i) {
      in_[i] = static_cast<int32_t>((i * 7 + 3) % vocab);
      tg_[i] = static_cast<int32_t>((i * 5 + 1) % vocab);
    }
  }
  MicroBatch micro_batch(int64_t, int64_t micro) override {
    return {in_.data(), tg_.data(), static_cast<uint64_t>(micro) * 4};
  }

 private:
  std::vector<int32_t> in_, tg_;
};

TEST(TrainStepAlloc, SteadyStateStepsAllocateNothing) {
  setenv("LEDGERLM_CPU_GEMM", "openblas", 1);  // read once, at the first GEMM of the process
  struct Case {
    const char* optim;
    const char* impl;
    const char* params;
    double dropout;
  };
  for (const Case& c : {Case{"adamw", "fused", "fp32", 0.0}, Case{"adamw", "foreach", "bf16", 0.1},
                        Case{"adamw", "loop", "fp16", 0.0}, Case{"sgd", "fused", "fp32", 0.1}}) {
    RunConfig cfg = testing::tiny_config_make(c.optim, 11);
    cfg.optim.impl = c.impl;
    cfg.precision.params = c.params;
    cfg.model.dropout = c.dropout;
    auto backend = backend_create_cpu(2);
    ModelState state(cfg, *backend);
    state.init_weights(3);
    const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len;
    state.model().plan(B, T);
    FixedBatches batches(B, T, cfg.model.vocab_size);
    for (int64_t s = 1; s <= 2; ++s) train_step(state, batches, s, cfg.optim.lr);
    int64_t news = 0;
    std::vector<int64_t> optim_news;
    for (int64_t s = 3; s <= 5; ++s) {
      const MicroBatch mb = batches.micro_batch(s, 0);
      ForwardOptions fo;
      fo.training = true;
      fo.seed = 5;
      fo.step = static_cast<uint64_t>(s);
      state.zero_grads();
      const int64_t before = g_news.load();
      state.model().forward(state.units(), mb.inputs, mb.targets, B, T, fo);
      state.model().backward(state.units(), 1.0);
      news += g_news.load() - before;
      const int64_t before_optim = g_news.load();
      state.optimizer_step(s, cfg.optim.lr);  // the optimizer moves the weights on
      optim_news.push_back(g_news.load() - before_optim);
    }
    const std::string what = std::string(c.optim) + "/" + c.impl + " params " + c.params +
                             " dropout " + std::to_string(c.dropout);
    EXPECT_EQ(news, 0) << what << ": operator new calls in 3 forward/backward passes";
    EXPECT_EQ(optim_news[0], optim_news[1]) << what << ": optimizer step allocations changed";
    EXPECT_EQ(optim_news[1], optim_news[2]) << what << ": optimizer step allocations changed";
    EXPECT_LE(optim_news[0], 16) << what << ": operator new calls in one optimizer step";
  }
}

}  // namespace
}  // namespace ledgerlm
