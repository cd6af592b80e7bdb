// What a training step moves between host and backend memory, from the backend's own transfer
// counters (Backend::transfers): up, only each micro-batch's token ids and targets; down, only
// scalars — one loss sum per micro-batch, one gradient sum of squares per sharding unit, and the
// per-tensor sums an optimizer's norms need (LAMB; LARS on the tensors it adapts; Adafactor).
// Adafactor's factored row and column statistics are host memory by design (optim_op.h) and are
// counted as a device backend would move them: the accumulators down after the sums, the row
// fractions and column statistics up before U^2 and again before the update. Every count below is
// derived from the parameter table, not measured and pasted, so a step that starts copying a tensor
// (or reading a gradient back to the host) fails here on any CPU. The suite also runs on the guard
// backend (label guard), where such a copy would fault instead.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/backends/backend_factory.h"
#include "tests/support/train_test_support.h"
#include "train/step/model_state.h"

namespace ledgerlm {
namespace {

struct Expected {
  int64_t up_calls = 0, up_bytes = 0, down_calls = 0, down_bytes = 0;
};

// Counts from the table: A micro-batches of B x T, U units, P tensors of which F are matrices.
Expected expected_step(const RunConfig& cfg, const ParamTable& table) {
  const int64_t A = cfg.train.accum, B = cfg.train.micro_batch, T = cfg.train.seq_len;
  const int64_t U = static_cast<int64_t>(table.units.size());
  const int64_t P = static_cast<int64_t>(table.params.size());
  Expected e;
  e.up_calls = 2 * A;  // token ids and targets of every micro-batch
  e.up_bytes = 2 * A * B * T * static_cast<int64_t>(sizeof(int32_t));
  e.down_calls = A + U;  // loss sums; gradient sums of squares
  e.down_bytes = 8 * (A + U);
  const std::string& o = cfg.optim.name;
  if (o == "lamb") {  // sum w^2 and sum r^2 per tensor
    e.down_calls += P;
    e.down_bytes += 16 * P;
  }
  if (o == "lars") {  // sum w^2 and sum g^2 per tensor with a trust ratio (not 1-D ones here)
    for (const ParamInfo& p : table.params) {
      if (cfg.optim.lars_exclude_1d && p.shape.size() <= 1) continue;
      e.down_calls += 1;
      e.down_bytes += 16;
    }
  }
  if (o == "adafactor") {
    for (const ParamInfo& p : table.params) {
      if (p.shape.size() != 2) {  // vector: sums w^2 and U^2 in one pass
        e.down_calls += 1;
        e.down_bytes += 16;
        continue;
      }
      const int64_t rows = p.hf_rows > 0 ? p.hf_rows : p.shape[0], cols = p.shape[1];
      e.down_calls += 3;  // sums, the row/column accumulators, U^2's sum
      e.down_bytes += 16 + 8 * (rows + cols) + 16;
      e.up_calls += 2;  // row fractions and columns, for U^2 and for the update
      e.up_bytes += 2 * 4 * (rows + cols);
    }
  }
  return e;
}

// (optimizer, precision.params): every optimizer in fp32; AdamW with bf16 and fp16 compute
// copies too (loss scaling and the compute-copy write add no transfer).
using Case = std::pair<const char*, const char*>;
class TrainTransfers : public ::testing::TestWithParam<Case> {};

TEST_P(TrainTransfers, AStepMovesOnlyTokensUpAndStatedScalarsDown) {
  RunConfig cfg = testing::tiny_config_make(GetParam().first, 3);
  cfg.precision.params = GetParam().second;
  cfg.train.accum = 2;
  cfg.train.micro_batch = 4;
  auto backend = backend_create("cpu", BackendOptions{2, 0});
  ModelState state(cfg, *backend);
  state.init_weights(3);
  const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len;
  state.model().plan(B, T);
  static const std::vector<int32_t> corpus = testing::corpus_make(8);
  testing::CorpusBatches batches(
      corpus, 5, B, T, [](int64_t s, int64_t m) { return static_cast<uint64_t>(2 * s + m); });
  train_step(state, batches, 1, 1e-3);  // the first step allocates optimizer state
  for (int64_t step = 2; step <= 3; ++step) {
    backend->reset_transfers();
    const StepResult r = train_step(state, batches, step, 1e-3);
    ASSERT_FALSE(r.skipped);
    const TransferStats& t = backend->transfers();
    const Expected e = expected_step(cfg, state.table());
    EXPECT_EQ(t.up_calls, e.up_calls)
        << GetParam().first << "/" << GetParam().second << " step " << step;
    EXPECT_EQ(t.up_bytes, e.up_bytes)
        << GetParam().first << "/" << GetParam().second << " step " << step;
    EXPECT_EQ(t.down_calls, e.down_calls)
        << GetParam().first << "/" << GetParam().second << " step " << step;
    EXPECT_EQ(t.down_bytes, e.down_bytes)
        << GetParam().first << "/" << GetParam().second << " step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(All, TrainTransfers,
                         ::testing::Values(Case{"sgd", "fp32"}, Case{"adamw", "fp32"},
                                           Case{"lamb", "fp32"}, Case{"lars", "fp32"},
                                           Case{"adafactor", "fp32"}, Case{"adamw8bit", "fp32"},
                                           Case{"adamw", "bf16"}, Case{"adamw", "fp16"}));

}  // namespace
}  // namespace ledgerlm
