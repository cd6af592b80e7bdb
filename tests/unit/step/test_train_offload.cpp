// optim.offload = disk against optim.offload = none, for every optimizer, with fp32 and bf16
// weights: after real training steps on the tiny GPT the fp32 master, the compute copy and every
// optimizer state tensor must be bitwise equal (the same element functions run on the same
// values; only where the bytes live differs). The staging arena is 64 KiB against ~600 KB of
// AdamW state per block, so each step streams the state through it several times over, on a device
// slowed to 150 us per read so that read-ahead and write-behind are in flight while pieces are
// used. Checkpoint pieces of the paged state are read through the offload backend.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tests/support/data_test_support.h"
#include "tests/support/train_test_support.h"
#include "train/step/model_state.h"

namespace ledgerlm {
namespace {

struct Snapshot {
  std::vector<uint8_t> master, params;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> states;
  OffloadStats io;
  int64_t arena = 0, file_bytes = 0;
};

std::vector<uint8_t> host_copy(Backend& be, const void* data, DType dt, int64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n) * dtype_size(dt));
  be.copy_to_host(out.data(), Tensor(const_cast<void*>(data), dt), n);
  return out;
}

Snapshot train(const RunConfig& cfg, int steps) {
  auto backend = backend_create_cpu(2);
  ModelState state(cfg, *backend);
  state.init_weights(static_cast<uint64_t>(cfg.train.seed));
  const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len;
  state.model().plan(B, T);
  static const std::vector<int32_t> corpus = testing::corpus_make(16);
  testing::CorpusBatches batches(corpus, 5, B, T,
                                 [](int64_t s, int64_t) { return static_cast<uint64_t>(s); });
  for (int64_t s = 1; s <= steps; ++s) {
    const StepResult st = train_step(state, batches, s, cfg.optim.lr);
    EXPECT_FALSE(st.skipped) << cfg.optim.name << " step " << s;
  }
  Snapshot r;
  Backend& sb = state.state_backend();
  r.params = host_copy(*backend, state.params().data, state.plan().params,
                       state.placement().compute_length);
  // fp32 weights without offload are their own master; offload keeps a separate one (it moves).
  r.master = state.placement().master_is_compute
                 ? r.params
                 : host_copy(sb, state.master(), DType::kF32, state.placement().master_length);
  for (const StateView& v : state.optimizer().state_views()) {
    std::vector<uint8_t> bytes =
        v.host ? std::vector<uint8_t>(static_cast<const uint8_t*>(v.data),
                                      static_cast<const uint8_t*>(v.data) +
                                          v.numel * static_cast<int64_t>(dtype_size(v.dtype)))
               : host_copy(sb, v.data, v.dtype, v.numel);
    r.states.emplace_back(v.name + "#" + std::to_string(v.param), std::move(bytes));
  }
  if (OffloadPager* pager = state.offload_pager()) {
    r.io = pager->stats();
    r.arena = pager->staging_bytes();
    for (const OffloadRegionInfo& f : pager->regions()) r.file_bytes += f.bytes;
  }
  return r;
}

void expect_same(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                 const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) {
      ADD_FAILURE() << what << ": first differing byte " << i << " of " << a.size();
      return;
    }
}

struct Case {
  const char* optim;
  double lr;
};

class TrainOffload : public ::testing::TestWithParam<std::tuple<Case, const char*>> {};

TEST_P(TrainOffload, DiskIsBitIdenticalToNone) {
  const auto [c, params] = GetParam();
  testing::TempDir dir("ledgerlm_offload_");
  RunConfig cfg = testing::tiny_config_make(c.optim, 11);
  cfg.optim.lr = c.lr;
  cfg.optim.weight_decay = 0.01;
  if (std::string(c.optim) == "adamw_schedulefree") cfg.optim.schedule = "constant";
  cfg.optim.ademamix_warmup = 10;
  cfg.model.n_embd = 64;  // ~110k parameters: AdamW's state in files is 3.3x the 64 KiB arena
  cfg.precision.params = params;
  cfg.train.out_dir = dir.file("runs");
  cfg.train.name = "offload";
  cfg.train.max_steps = 4;
  cfg.validate();
  const int steps = 4;
  const Snapshot plain = train(cfg, steps);
  cfg.optim.offload = "disk";
  cfg.optim.offload_staging_mb = 0.0625;  // 64 KiB
  ::setenv("LEDGERLM_OFFLOAD_TEST_READ_DELAY_US", "150", 1);
  const Snapshot paged = train(cfg, steps);
  ::unsetenv("LEDGERLM_OFFLOAD_TEST_READ_DELAY_US");
  expect_same(plain.master, paged.master, "fp32 master");
  expect_same(plain.params, paged.params, "compute copy");
  ASSERT_EQ(plain.states.size(), paged.states.size());
  for (size_t i = 0; i < plain.states.size(); ++i) {
    ASSERT_EQ(plain.states[i].first, paged.states[i].first);
    expect_same(plain.states[i].second, paged.states[i].second, "state " + plain.states[i].first);
  }
  // Every byte in the files is read at least once per step (the state does not fit the arena:
  // nothing stays staged from one step to the next), and AdamW's streams through the arena
  // more than three times per step.
  if (paged.file_bytes > paged.arena) {  // (Adafactor's few vector statistics stay staged)
    EXPECT_GE(paged.io.bytes_read, steps * paged.file_bytes)
        << "read " << paged.io.bytes_read << " bytes in " << steps << " steps of "
        << paged.file_bytes << " bytes in files through a " << paged.arena << "-byte arena";
  }
  if (std::string(c.optim) == "adamw") {
    EXPECT_GE(paged.file_bytes, 3 * paged.arena);
  }
  EXPECT_GT(paged.io.bytes_written, 0);
}

const Case kCases[] = {
    {"sgd", 0.1},        {"adamw", 1e-2},     {"lamb", 3e-2}, {"lars", 10.0},
    {"adafactor", 3e-2}, {"adamw8bit", 1e-2}, {"lion", 3e-3}, {"adamw_schedulefree", 1e-2},
    {"ademamix", 1e-2},  {"muon", 3e-2}};

INSTANTIATE_TEST_SUITE_P(EveryOptimizer, TrainOffload,
                         ::testing::Combine(::testing::ValuesIn(kCases),
                                            ::testing::Values("fp32", "bf16")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).optim) + "_" +
                                  std::get<1>(info.param);
                         });

}  // namespace
}  // namespace ledgerlm
