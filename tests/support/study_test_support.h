// Shared by the study tests of the cli room (test_study_plan, test_study_finals): a study file
// written from its text.
#pragma once

#include <string>

#include <gtest/gtest.h>

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

}  // namespace ledgerlm::testing
