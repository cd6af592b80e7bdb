// Shared by the trainer-level tests (test_train_*): a small repetitive character corpus that the
// tiny GPT learns within a few dozen steps, the tiny GPT's RunConfig, the batch of one step
// drawn from that corpus (deterministic, so every run of a test sees the same batches), and a
// BatchSource serving those batches to train_step, and backend tensors read back to the host.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/rng.h"
#include "tests/support/config_test_support.h"
#include "train/config/run_config.h"
#include "train/step/train_step.h"

namespace ledgerlm::testing {

inline constexpr const char* kTinyText =
    "in the beginning god created the heaven and the earth. and the earth was without form, and "
    "void; and darkness was upon the face of the deep. and the spirit of god moved upon the face "
    "of the waters. and god said, let there be light: and there was light. ";

// Characters -> ids in [0, 32): letters, space, punctuation; kTinyText repeated `copies` times
// (a period of 263 characters).
inline std::vector<int32_t> corpus_make(int copies) {
  std::vector<int32_t> out;
  for (int c = 0; c < copies; ++c)
    for (const char* p = kTinyText; *p; ++p) {
      const char ch = *p;
      int32_t id = 31;
      if (ch >= 'a' && ch <= 'z')
        id = ch - 'a';
      else if (ch == ' ')
        id = 26;
      else if (ch == '.')
        id = 27;
      else if (ch == ',')
        id = 28;
      else if (ch == ';')
        id = 29;
      else if (ch == ':')
        id = 30;
      out.push_back(id);
    }
  return out;
}

// L2 H2 C32, T32, B8, vocab 32 (padded 64), no weight decay; the LR is left to the caller.
inline RunConfig tiny_config_make(const std::string& optim, int64_t seed) {
  RunConfig c = shape_config({.vocab = 32, .L = 2, .H = 2, .C = 32, .block = 32, .T = 32, .B = 8});
  c.train.seed = seed;
  c.optim.name = optim;
  c.optim.weight_decay = 0.0;
  return c;
}

// Fills inputs / targets (B*T each) with B corpus windows and their next tokens; window b starts
// at rng_bits(seed, kData, index, b) mod the valid span, so a given (seed, index) is one batch.
inline void batch_fill(const std::vector<int32_t>& corpus, uint64_t seed, uint64_t index, int64_t B,
                       int64_t T, int32_t* inputs, int32_t* targets) {
  const uint64_t span = corpus.size() - static_cast<uint64_t>(T) - 1;
  for (int64_t b = 0; b < B; ++b) {
    const auto bits = rng_bits(seed, RngStream::kData, index, static_cast<uint64_t>(b));
    const int64_t start = static_cast<int64_t>(bits[0] % span);
    for (int64_t t = 0; t < T; ++t) {
      inputs[b * T + t] = corpus[static_cast<size_t>(start + t)];
      targets[b * T + t] = corpus[static_cast<size_t>(start + t + 1)];
    }
  }
}

// Micro-batch m of step s is batch_fill(corpus, seed, index(s, m)); its rows are sequences
// m*B .. m*B + B-1 of the step's global batch.
class CorpusBatches final : public BatchSource {
 public:
  using Index = std::function<uint64_t(int64_t step, int64_t micro)>;
  CorpusBatches(const std::vector<int32_t>& corpus, uint64_t seed, int64_t B, int64_t T,
                Index index)
      : corpus_(corpus),
        seed_(seed),
        b_(B),
        t_(T),
        index_(std::move(index)),
        inputs_(static_cast<size_t>(B * T)),
        targets_(inputs_.size()) {}

  MicroBatch micro_batch(int64_t step, int64_t micro) override {
    batch_fill(corpus_, seed_, index_(step, micro), b_, t_, inputs_.data(), targets_.data());
    return {inputs_.data(), targets_.data(), static_cast<uint64_t>(micro * b_)};
  }

 private:
  const std::vector<int32_t>& corpus_;
  uint64_t seed_;
  int64_t b_, t_;
  Index index_;
  std::vector<int32_t> inputs_, targets_;
};

// `n` elements of a backend tensor of fp32 values, copied to the host.
inline std::vector<float> host_floats(Backend& be, Tensor t, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  be.copy_to_host(out.data(), t, n);
  return out;
}

}  // namespace ledgerlm::testing
