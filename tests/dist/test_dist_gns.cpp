// train.gns under data parallelism: world 4 x accum 1 (small batches: the ranks' local gradients
// before the all-reduce) and world 1 x accum 4 (small batches: the micro-batches' own gradients),
// micro-batch 1, on the same data, see the same global batch of the same four sequences split the
// same way, so both paths estimate from the same pair of batch sizes (1 and 4 sequences) and must
// give the same per-step |G|^2 and tr(Sigma) estimates and B_simple. (The per-sequence brute
// force of the one-rank path is tests/unit/step/test_train_gns.cpp.) Also: world 2 x accum 1
// under ZeRO-1 gives the figures of world 1 x accum 2, and world 1 x accum 1 is refused in one
// line before anything is written.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::ledgerlm_binary;
using testing::run_command;
using testing::run_many;
using testing::run_series;

std::string corpus_text() {
  std::string text;
  const char* words[] = {"the ", "lord ", "said ", "unto ", "moses ", "and ", "went ", "up "};
  uint64_t x = 88172645463325252ull;
  for (int i = 0; i < 5000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    text += words[x % 8];
  }
  return text;
}

// Per step, |a - b| <= rtol x max|ref| over the series; prints the worst step.
void expect_series_near(const std::vector<double>& ref, const std::vector<double>& got, double rtol,
                        const std::string& what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  ASSERT_FALSE(ref.empty()) << what;
  double scale = 0.0, worst = 0.0;
  size_t at = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    scale = std::max(scale, std::fabs(ref[i]));
    if (std::fabs(ref[i] - got[i]) > worst) worst = std::fabs(ref[i] - got[i]), at = i;
  }
  std::printf("%s: worst |diff| %.3g at step %zu (%.9g vs %.9g), max|ref| %.6g\n", what.c_str(),
              worst, at + 1, ref[at], got[at], scale);
  EXPECT_LE(worst, rtol * scale) << what;
}

TEST(DistGns, RanksMatchMicroBatchesOnTheSameGlobalBatch) {
  const std::string data = testing::resume_prepare_corpus("ledgerlm_dist_gns_", corpus_text());
  const std::string out = fs::path(data).parent_path().string() + "/runs";
  auto flags = [&](const std::string& name) {
    return testing::resume_tiny_flags(data, out, name) +
           " --train.micro_batch 1 --train.max_steps 4 --train.gns true --optim.lr 0.01";
  };
  const CommandResult w4 = run_many(4, {flags("w4") + " --train.accum 1"}, out);
  ASSERT_EQ(w4.exit_code, 0) << w4.output;
  const CommandResult w2 = run_many(2, {flags("w2z1") + " --train.accum 1 --dist.zero 1"}, out);
  ASSERT_EQ(w2.exit_code, 0) << w2.output;
  const CommandResult w1 =
      run_many(1, {flags("a4") + " --train.accum 4", flags("a2") + " --train.accum 2"}, out);
  ASSERT_EQ(w1.exit_code, 0) << w1.output;
  // fp32 gradients summed in another order (across ranks instead of into one buffer): squared
  // norms agree to ~1e-6 relative, and after a few steps the weights carry that rounding too.
  // The estimates are differences of squared norms, so they are compared relative to their
  // largest value over the run: 1e-5 (measured worst 3.3e-8 at world 4, 1.6e-15 at world 2),
  // B_simple likewise. A wrong batch
  // size or a missing rank's term changes them by tens of percent.
  for (const char* key : {"gns_g2", "gns_trace", "b_simple"}) {
    expect_series_near(run_series(out + "/a4", key), run_series(out + "/w4", key), 1e-5,
                       std::string(key) + " w1xA4 vs w4xA1");
    expect_series_near(run_series(out + "/a2", key), run_series(out + "/w2z1", key), 1e-5,
                       std::string(key) + " w1xA2 vs w2xA1 zero 1");
  }
  EXPECT_EQ(run_series(out + "/w4", "b_simple").size(), 4u);
}

TEST(DistGns, RefusedAtWorldOneAccumOne) {
  const std::string data = testing::resume_prepare_corpus("ledgerlm_dist_gns1_", corpus_text());
  const std::string out = fs::path(data).parent_path().string() + "/runs";
  const CommandResult r =
      run_command(ledgerlm_binary() + " train" + testing::resume_tiny_flags(data, out, "one") +
                  " --train.max_steps 1 --train.gns true 2>&1");
  std::printf("%s", r.output.c_str());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(
      r.output,
      "ledgerlm: error: train.gns: needs two batch sizes, but world 1 x train.accum 1 has one "
      "(use train.accum > 1 or more ranks)\n");
  EXPECT_FALSE(fs::exists(out + "/one")) << "nothing written for a refused run";
}

}  // namespace
}  // namespace ledgerlm
