// The `ledgerlm memory` command: the planner's worked figures from the command line (text and
// --json, a config file's model at a given world, stage and batch) and bad flags as one clear
// error. The figures themselves are checked in-process by tests/unit/ledger/test_memory_plan.cpp.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

TEST(MemoryCommand, WorkedFigureFromTheCommandLine) {
  auto r = testing::run_command(testing::ledgerlm_binary() +
                                " memory --params 1e9 --param-dtype bf16 --grad-dtype bf16 "
                                "--optim adamw --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["model_state_bytes"].get<int64_t>(), 16000000000);
  EXPECT_EQ(j["optimizer_bytes"].get<int64_t>(), 12000000000);

  r = testing::run_command(testing::ledgerlm_binary() +
                           " memory --params 7e9 --param-dtype bf16 --grad-dtype bf16 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("112.000"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("75.0%"), std::string::npos) << r.output;

  r = testing::run_command(testing::ledgerlm_binary() + " memory --config " +
                           testing::source_dir() +
                           "/configs/bench_small.toml --world 4 --zero 2 --micro-batch 2 "
                           "--accum 8 --recompute block --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["global_batch"].get<int64_t>(), 64);
  EXPECT_EQ(j["recompute"].get<std::string>(), "block");
}

// Counts past 1e15 are representable and the ledger's int64 byte totals hold them up to 1e17
// (16 bytes a parameter here: 1.6e18 < 2^63); past that the refusal names the real limit.
TEST(MemoryCommand, LargeParameterCountsUpToTheLedgersLimit) {
  auto r = testing::run_command(testing::ledgerlm_binary() +
                                " memory --params 1e15 --param-dtype bf16 --grad-dtype bf16 "
                                "--optim adamw --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["model_state_bytes"].get<int64_t>(), 16000000000000000);
  r = testing::run_command(testing::ledgerlm_binary() +
                           " memory --params 1e17 --param-dtype bf16 --grad-dtype bf16 "
                           "--optim adamw --json 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["model_state_bytes"].get<int64_t>(), 1600000000000000000);
  r = testing::run_command(testing::ledgerlm_binary() + " memory --params 2e17 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--params: expected a count from 1 to 1e17"), std::string::npos)
      << r.output;
}

TEST(MemoryCommand, BadInputIsOneClearError) {
  auto r = testing::run_command(testing::ledgerlm_binary() + " memory --params 1e9 --zero 5 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--zero"), std::string::npos) << r.output;
  r = testing::run_command(testing::ledgerlm_binary() + " memory --params 1e9 --optim adam 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("optim.name"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ledgerlm
