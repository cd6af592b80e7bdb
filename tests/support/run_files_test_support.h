// Shared by the tests of a run's outputs (test_run_summary, test_tensorboard): a byte-level
// corpus prepared once per test suite, tiny trainings (L2 H2 C32, T32) driven through the
// ledgerlm binary, and readers for what a run leaves behind.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// The records of a metrics.jsonl, in order (blank lines skipped).
inline std::vector<nlohmann::json> metrics_records(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

class RunFilesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_temp_dir("ledgerlm_runfiles_");
    ASSERT_FALSE(root_.empty());
    std::string text;
    for (int i = 0; text.size() < 30000; ++i)
      text +=
          "and god said, let there be light: and there was light " + std::to_string(i % 97) + ".\n";
    ASSERT_TRUE(write_file(root_ + "/corpus.txt", text));
    const CommandResult r = run_command(bin() + " prepare --input " + root_ + "/corpus.txt --out " +
                                        root_ + "/data --tokenizer bytes");
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  static std::string bin() { return ledgerlm_binary(); }
  static std::string run_dir(const std::string& name) { return root_ + "/runs/" + name; }

  // The tiny model's flags for run `name` (evaluations every 4 steps, 8 val windows).
  static std::string flags(const std::string& name) {
    return " --data.dir " + root_ + "/data --train.out_dir " + root_ + "/runs --train.name " +
           name +
           " --model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 32"
           " --train.seq_len 32 --train.micro_batch 8 --train.threads 2 --train.eval_windows 8"
           " --train.eval_interval 4 --train.log_interval 5 --optim.lr 3e-3";
  }

  static CommandResult train(const std::string& name, const std::string& extra) {
    return run_command(bin() + " train" + flags(name) + " " + extra);
  }

  static std::vector<nlohmann::json> metrics(const std::string& name) {
    return metrics_records(run_dir(name) + "/metrics.jsonl");
  }

  static nlohmann::json summary_json(const std::string& name) {
    return nlohmann::json::parse(read_file(run_dir(name) + "/summary.json"));
  }

  static std::string root_;
};

inline std::string RunFilesTest::root_;

}  // namespace ledgerlm::testing
