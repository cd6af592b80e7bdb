// The data loader's global order: every slicing of the same global batch (world x micro-batch x
// accumulation) sees exactly the same windows in the same order, epochs are permutations,
// batches are pure functions of (seed, step, micro) (so a resume needs no loader position), val
// windows are fixed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/meta.h"
#include "data/prepare.h"
#include "model/base/check.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

// Token i == i (vocab 2^20, width 4), so a window's first input is its start offset.
constexpr int64_t kVocab = int64_t{1} << 20;

TokenArray iota_tokens(int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) t[i] = static_cast<int32_t>(i);
  return token_array_make(t, kVocab, nullptr);
}

DataLoader make_loader(int world, int64_t micro, int64_t accum, int rank, uint64_t seed = 42,
                       int64_t n_train = 10000, int64_t seq = 16, int64_t n_val = 1000) {
  LoaderConfig c;
  c.seq = seq;
  c.micro_batch = micro;
  c.accum = accum;
  c.world = world;
  c.rank = rank;
  c.seed = seed;
  return DataLoader(iota_tokens(n_train), iota_tokens(n_val), c);
}

// Window starts of step `step` for a world x micro x accum factorisation, concatenated over
// micro-batches m and ranks r in (m, r) order, read back from the filled batches; also checks
// every row's targets are its inputs shifted by one.
std::vector<int64_t> step_windows(int world, int64_t micro, int64_t accum, int64_t step) {
  const int64_t seq = 16;
  std::vector<int64_t> out;
  std::vector<DataLoader> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(make_loader(world, micro, accum, r));
  std::vector<int32_t> in(static_cast<size_t>(micro * seq)), tg(in.size());
  for (int64_t m = 0; m < accum; ++m) {
    for (int r = 0; r < world; ++r) {
      ranks[r].batch_at(step, m, in.data(), tg.data());
      for (int64_t b = 0; b < micro; ++b) {
        for (int64_t t = 0; t < seq; ++t) {
          EXPECT_EQ(in[b * seq + t], in[b * seq] + t);
          EXPECT_EQ(tg[b * seq + t], in[b * seq] + t + 1);
        }
        out.push_back(in[b * seq]);
      }
    }
  }
  return out;
}

TEST(Loader, PermutationIsABijection) {
  for (int64_t n : {1, 2, 3, 5, 7, 64, 100, 1000, 4097}) {
    for (uint64_t epoch : {0u, 1u, 9u}) {
      std::vector<char> seen(static_cast<size_t>(n), 0);
      for (int64_t i = 0; i < n; ++i) {
        int64_t p = loader_permute(42, epoch, i, n);
        ASSERT_GE(p, 0);
        ASSERT_LT(p, n);
        ASSERT_FALSE(seen[p]) << "n=" << n << " epoch=" << epoch << " collision at " << p;
        seen[p] = 1;
      }
    }
  }
  // Different epochs and seeds give different orders (n = 1000: equal orders by chance have
  // probability 1/1000!).
  int same_epoch = 0, same_seed = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    same_epoch += loader_permute(42, 0, i, 1000) == loader_permute(42, 1, i, 1000);
    same_seed += loader_permute(42, 0, i, 1000) == loader_permute(43, 0, i, 1000);
  }
  EXPECT_LT(same_epoch, 20);
  EXPECT_LT(same_seed, 20);
}

TEST(Loader, EveryFactorisationSeesTheSameGlobalBatch) {
  // G = 8 windows per step as 1x8x1, 2x2x2, 4x1x2, 8x1x1 and 1x1x8 (world x micro x accum).
  // 624 windows per epoch / 8 = 78 steps per epoch: steps 75..82 straddle the epoch boundary.
  for (int64_t step : {0, 1, 2, 75, 77, 78, 79, 82, 500}) {
    std::vector<int64_t> ref = step_windows(1, 8, 1, step);
    ASSERT_EQ(ref.size(), 8u);
    EXPECT_EQ(step_windows(2, 2, 2, step), ref) << "step " << step;
    EXPECT_EQ(step_windows(4, 1, 2, step), ref) << "step " << step;
    EXPECT_EQ(step_windows(8, 1, 1, step), ref) << "step " << step;
    EXPECT_EQ(step_windows(1, 1, 8, step), ref) << "step " << step;
  }
  // Different steps see different windows.
  EXPECT_NE(step_windows(1, 8, 1, 0), step_windows(1, 8, 1, 1));
}

TEST(Loader, EachEpochVisitsEveryWindowOnce) {
  DataLoader loader = make_loader(1, 8, 1, 0);
  const int64_t w = loader.windows_per_epoch();
  EXPECT_EQ(w, 10000 / 16 - 1);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> starts;
    for (int64_t j = 0; j < w; ++j) starts.insert(loader.window_start(epoch * w + j));
    ASSERT_EQ(static_cast<int64_t>(starts.size()), w) << "epoch " << epoch;
    // Non-overlapping windows of stride seq from one offset, all inside the split.
    int64_t offset = *starts.begin();
    EXPECT_LT(offset, 16);
    for (int64_t s : starts) {
      EXPECT_EQ((s - offset) % 16, 0);
      EXPECT_LE(s + 16 + 1, 10000);
    }
  }
  // Offsets differ between epochs (so do window boundaries); 16 possible values, epochs 0..9.
  std::set<int64_t> offsets;
  for (int64_t epoch = 0; epoch < 10; ++epoch) offsets.insert(loader.window_start(epoch * w) % 16);
  EXPECT_GT(offsets.size(), 1u);
}

TEST(Loader, BatchesArePureAndSeeded) {
  DataLoader a = make_loader(2, 4, 2, 1), b = make_loader(2, 4, 2, 1);
  DataLoader other_seed = make_loader(2, 4, 2, 1, 7);
  std::vector<int32_t> ia(4 * 16), ta(ia.size()), ib(ia.size()), tb(ia.size());
  a.batch_at(123, 1, ia.data(), ta.data());
  b.batch_at(5, 0, ib.data(), tb.data());  // unrelated call in between must not matter
  b.batch_at(123, 1, ib.data(), tb.data());
  EXPECT_EQ(ia, ib);
  EXPECT_EQ(ta, tb);
  other_seed.batch_at(123, 1, ib.data(), tb.data());
  EXPECT_NE(ia, ib);
}

TEST(Loader, ValWindowsAreFixedAndEvenlySpaced) {
  DataLoader loader = make_loader(1, 8, 1, 0);  // 1000 val tokens: 62 windows of 16+1
  std::vector<int64_t> all = loader.val_windows(16, 0);
  ASSERT_EQ(all.size(), 62u);
  for (size_t k = 0; k < all.size(); ++k) EXPECT_EQ(all[k], static_cast<int64_t>(k) * 16);
  std::vector<int64_t> some = loader.val_windows(16, 10);
  ASSERT_EQ(some.size(), 10u);
  EXPECT_EQ(some, loader.val_windows(16, 10));
  EXPECT_EQ(some, make_loader(4, 1, 2, 3, 99).val_windows(16, 10));  // rank/seed independent
  for (size_t k = 1; k < some.size(); ++k) {
    int64_t gap = some[k] - some[k - 1];
    EXPECT_TRUE(gap == 6 * 16 || gap == 7 * 16) << "gap " << gap;  // 62/10 slots apart
  }
  EXPECT_LE(some.back() + 17, 1000);
  EXPECT_EQ(loader.val_windows(16, 1000).size(), 62u);  // capped at what exists
  std::vector<int32_t> in(16), tg(16);
  loader.val_window_fill(some[3], 16, in.data(), tg.data());
  EXPECT_EQ(in[0], some[3]);
  EXPECT_EQ(tg[15], some[3] + 16);
  EXPECT_THROW(loader.val_windows(1000, 4), Error);  // val shorter than one window
}

TEST(Loader, RejectsTooLittleDataAndBadConfig) {
  try {
    make_loader(1, 1, 1, 0, 42, /*n_train=*/16, /*seq=*/16);
    FAIL() << "accepted a train split shorter than one window";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("fewer than one window"), std::string::npos) << e.what();
  }
  // Exactly one window (n = seq + 1) works, with offset 0.
  DataLoader one = make_loader(1, 2, 1, 0, 42, 17, 16);
  EXPECT_EQ(one.windows_per_epoch(), 1);
  EXPECT_EQ(one.window_start(5), 0);
  EXPECT_THROW(make_loader(2, 1, 1, 2), Error);  // rank >= world
  EXPECT_THROW(make_loader(1, 0, 1, 0), Error);
}

TEST(Loader, LoadsAPreparedDirectoryIntoTrackedMemory) {
  char templ[] = "/tmp/llm_loader_XXXXXX";
  std::string dir = ::mkdtemp(templ);
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i) + " of the corpus\n";
  testing::write_file(dir + "/in.txt", text);
  PrepareOptions opt;
  opt.inputs = {dir + "/in.txt"};
  opt.out_dir = dir + "/data";
  opt.tokenizer = "bytes";
  opt.quiet = true;
  data_prepare(opt);
  DataMeta meta = meta_read(dir + "/data");

  MemoryTracker tracker;
  {
    LoaderConfig c;
    c.seq = 32;
    c.micro_batch = 4;
    DataLoader loader(dir + "/data", c, &tracker);
    EXPECT_EQ(loader.train_tokens().size(), meta.train.tokens);
    EXPECT_EQ(loader.val_tokens().size(), meta.val.tokens);
    // uint16 storage (vocab 257): 2 bytes per token, accounted as data.
    EXPECT_EQ(tracker.usage(MemTag::kData).current, 2 * (meta.train.tokens + meta.val.tokens));
    std::vector<int32_t> in(4 * 32), tg(in.size());
    loader.batch_at(0, 0, in.data(), tg.data());
    for (int32_t t : in) EXPECT_TRUE(t == 256 || (t >= 32 && t < 127) || t == '\n');
  }
  EXPECT_EQ(tracker.usage(MemTag::kData).current, 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ledgerlm
