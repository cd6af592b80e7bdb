// Shared by the study tests: a study file written from its text (the cli room's test_study_plan,
// test_study_finals) and a small prepared corpus with the fixture and names the e2e study tests
// share.
#pragma once

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// `text` written as a new study file (studyN.toml in this process's study directory); its path.
inline std::string write_study(const std::string& text) {
  static int counter = 0;
  static const std::string dir = make_temp_dir("ledgerlm_study_");
  const std::string path = dir + "/study" + std::to_string(counter++) + ".toml";
  EXPECT_TRUE(write_file(path, text));
  return path;
}

// A new temporary directory (PREFIX...) holding data/, a small byte-level corpus prepared by
// `ledgerlm prepare`: its path, or "" after a test failure.
inline std::string make_study_data_dir(const std::string& prefix) {
  const std::string root = make_temp_dir(prefix);
  if (root.empty()) return "";
  std::string text;
  for (int i = 0; text.size() < 40000; ++i)
    text += "in the beginning was the word, and the word was " + std::to_string(i % 31) + ".\n";
  EXPECT_TRUE(write_file(root + "/corpus.txt", text));
  const CommandResult r = run_command(ledgerlm_binary() + " prepare --input " + root +
                                      "/corpus.txt --out " + root + "/data --tokenizer bytes");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? root : "";
}

// The base of the e2e study tests' fixtures: `root_`, a directory made by make_study_data_dir
// once before the suite's first test, named after `Suite::kPrefix`.
template <class Suite>
class StudyDataSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = make_study_data_dir(Suite::kPrefix);
    ASSERT_FALSE(root_.empty());
  }
  static inline std::string root_;
};

// The names the e2e study tests use unqualified: `using namespace testing::study_test_names;`.
namespace study_test_names {
namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::CommandResult;
using testing::read_file;
using testing::run_command;
using testing::write_file;
}  // namespace study_test_names

}  // namespace ledgerlm::testing
