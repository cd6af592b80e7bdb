// What each ZeRO stage saves, measured independently of the allocator being measured: a model
// of ~100 MB of fp32 parameters (L8 C512, 25 M parameters) trains 2 steps on 2 ranks at each
// stage; each rank reports its RssAnon (the kernel's count of its private resident memory) at
// the last step. The change from stage 0 -> 1 -> 2 -> 3 must be within +-10% of the change the
// planner predicts for the rank's peak (both ranks). Everything outside the ledger (libraries,
// MPI's buffers, stacks) is the same at every stage and cancels in the differences. The ledger's
// own rows must match too: the communication buffers measured by the tracker equal the planner's
// prediction at every stage.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct StageMemory {
  std::vector<double> rss_anon;  // per rank
  double predicted_peak = 0;     // rank 0's planner prediction
  double comm_peak = 0, comm_predicted = 0;
};

StageMemory read_stage(const std::string& run_dir) {
  StageMemory m;
  std::ifstream f(run_dir + "/metrics.jsonl");
  json last;
  for (std::string line; std::getline(f, line);) {
    json r = json::parse(line, nullptr, false);
    if (r.is_object() && r.contains("loss") && r.contains("mem_ranks")) last = r;
  }
  if (!last.is_object()) return m;
  for (const json& rank : last["mem_ranks"]) m.rss_anon.push_back(rank["rss_anon"].get<double>());
  m.predicted_peak = last["mem"]["total"]["predicted"].get<double>();
  if (last["mem"].contains("comm")) {
    m.comm_peak = last["mem"]["comm"]["peak"].get<double>();
    m.comm_predicted = last["mem"]["comm"]["predicted"].get<double>();
  }
  return m;
}

TEST(DistMemory, RssAnonChangeBetweenStagesMatchesThePlanner) {
  LEDGERLM_REQUIRE_MPI();
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "skipped: under AddressSanitizer the RSS holds its shadow memory and quarantine";
#endif
  std::string text;
  for (int i = 0; i < 200; ++i)
    text += "Memory is what the ledger counts, line " + std::to_string(i) + ".\n";
  const std::string data = testing::resume_prepare_corpus("ledgerlm_dist_mem_", text);
  const std::string out = fs::path(data).parent_path().string() + "/runs";
  std::vector<StageMemory> stages;
  for (int stage = 0; stage <= 3; ++stage) {
    const std::string name = "mem_z" + std::to_string(stage);
    const testing::CommandResult r = testing::run_command(
        testing::mpirun_prefix(2) + testing::ledgerlm_binary() + " train" +
        testing::resume_tiny_flags(data, out, name) +
        " --model.n_layer 8 --model.n_head 8 --model.n_embd 512 --train.micro_batch 1"
        " --train.max_steps 2 --train.log_interval 1 --dist.zero " +
        std::to_string(stage) + " 2>&1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    stages.push_back(read_stage(out + "/" + name));
    ASSERT_EQ(stages.back().rss_anon.size(), 2u) << "per-rank memory in metrics.jsonl";
    std::printf(
        "stage %d: RssAnon rank 0 %.1f MB, rank 1 %.1f MB | predicted peak %.1f MB | "
        "comm %.1f MB (predicted %.1f)\n",
        stage, stages.back().rss_anon[0] / 1e6, stages.back().rss_anon[1] / 1e6,
        stages.back().predicted_peak / 1e6, stages.back().comm_peak / 1e6,
        stages.back().comm_predicted / 1e6);
    EXPECT_EQ(stages.back().comm_peak, stages.back().comm_predicted) << "stage " << stage;
  }
  for (int s = 0; s + 1 < 4; ++s) {
    const double predicted = stages[s].predicted_peak - stages[s + 1].predicted_peak;
    EXPECT_GT(predicted, 20e6) << "each stage should save memory on this model";
    for (int rank = 0; rank < 2; ++rank) {
      const double measured = stages[s].rss_anon[rank] - stages[s + 1].rss_anon[rank];
      std::printf("stage %d -> %d, rank %d: RssAnon change %.1f MB, predicted %.1f MB (%+.1f%%)\n",
                  s, s + 1, rank, measured / 1e6, predicted / 1e6,
                  100.0 * (measured - predicted) / predicted);
      EXPECT_NEAR(measured, predicted, 0.10 * std::fabs(predicted))
          << "stage " << s << " -> " << s + 1 << ", rank " << rank;
    }
  }
}

}  // namespace
}  // namespace ledgerlm
