// Shared by the e2e tests that drive the ledgerlm binary with command lines and check how it
// refuses bad input (test_cli_inputs, test_prepare_scale, test_prepare_test_split).
#pragma once

#include <algorithm>
#include <initializer_list>
#include <string>

#include <gtest/gtest.h>

#include "tests/support/test_util.h"
#include "train/run/run_dir.h"

namespace ledgerlm::testing {

// A path or value as one shell word, for the command lines these tests build.
inline std::string q(const std::string& s) {
  return shell_quote(s);
}

// Exactly one line "ledgerlm: error: ..." on stderr containing every needle; non-zero exit.
// `prefix` goes before the binary (a `timeout` for a command that must not block).
inline void expect_one_line_error(const std::string& args,
                                  std::initializer_list<std::string> needles,
                                  const std::string& prefix = "") {
  const std::string err = make_temp_dir("one_line_error_") + "/stderr";
  CommandResult r =
      run_command("{ " + prefix + ledgerlm_binary() + " " + args + " 2>" + err + " >/dev/null; }");
  EXPECT_NE(r.exit_code, 0) << "accepted: ledgerlm " << args;
  const std::string text = read_file(err);
  EXPECT_EQ(text.rfind("ledgerlm: error: ", 0), 0u) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
  for (const auto& n : needles) EXPECT_NE(text.find(n), std::string::npos) << n << " in: " << text;
}

}  // namespace ledgerlm::testing
