// Admission under mpirun (train/run/memory_admission.h): the ranks on one host share its memory,
// so a limit that holds one rank's prediction but not two refuses a two-rank job on this host in
// one line that names both ranks, with no run directory; a limit that holds both admits it.
// The limit is LEDGERLM_MEMORY_LIMIT_BYTES, exported to every rank. Margins: the limits are
// 1.5x and 3x one rank's need (peak + allowance); the two ranks' peaks differ by far less than
// the 0.5x between (ZeRO-0 replicates the model state, the allowance alone is 128 MB).
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"
#include "train/run/memory_admission.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;

class DistAdmission : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::mpirun_path().empty()) return;
    std::string text;
    for (int i = 0; i < 300; ++i) text += "Let there be light, line " + std::to_string(i) + ".\n";
    data_ = testing::resume_prepare_corpus("ledgerlm_dist_admission_", text);
    out_ = fs::path(data_).parent_path().string() + "/runs";
  }
  static std::string flags(const std::string& name) {
    return testing::resume_tiny_flags(data_, out_, name) + " --train.max_steps 2 --train.threads 1";
  }
  // One rank's need on a two-rank job: the planner's peak (rank 0) plus the allowance.
  static int64_t one_rank_need() {
    const CommandResult r = testing::run_command(testing::ledgerlm_binary() +
                                                 " memory --json --world 2" + flags("x") + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    const int64_t peak = nlohmann::json::parse(r.output)["per_rank_peak_bytes"].get<int64_t>();
    return peak + kAdmissionAllowanceBytes +
           static_cast<int64_t>(kAdmissionAllowanceFraction * static_cast<double>(peak));
  }
  static CommandResult train(const std::string& name, int64_t limit) {
    return testing::run_command("LEDGERLM_MEMORY_LIMIT_BYTES=" + std::to_string(limit) + " " +
                                testing::mpirun_prefix(2) + "-x LEDGERLM_MEMORY_LIMIT_BYTES " +
                                testing::ledgerlm_binary() + " train" + flags(name) + " 2>&1");
  }
  static std::string data_, out_;
};
std::string DistAdmission::data_, DistAdmission::out_;

TEST_F(DistAdmission, TwoRanksOnOneHostNeedTwiceTheMemory) {
  LEDGERLM_REQUIRE_MPI();
  const int64_t need = one_rank_need();
  CommandResult r = train("two_over", need * 3 / 2);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("ledgerlm: error: rank 0: memory: this run needs"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find(" x 2 ranks on this host"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(out_ + "/two_over")) << "nothing is created on a refused start";

  r = train("two_fit", need * 3);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(out_ + "/two_fit/metrics.jsonl")) << r.output;
}

}  // namespace
}  // namespace ledgerlm
