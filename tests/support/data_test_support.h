// Shared by the data tests (test_data_*): the Hugging Face tokenizer fixture, and a scoped
// temporary directory, removed with everything in it when the test ends (the data tests check what
// files a command leaves behind, so each test gets a directory of its own rather than a
// process-wide one).
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// The Hugging Face tokenizer fixture (tests/reference/fixtures/hf_tokenizer: the tokenizers
// library's own files and ids, tests/reference/README.md), and one of its files' text.
inline std::string hf_tokenizer_fixture_dir() {
  return source_dir() + "/tests/reference/fixtures/hf_tokenizer";
}
inline std::string hf_tokenizer_fixture(const std::string& name) {
  return read_file(hf_tokenizer_fixture_dir() + "/" + name);
}
// The tokenizer-family fixtures (tests/reference/fixtures/hf_families/<family>: "smollm2",
// "qwen2", "llama3"), each a tokenizer.json and the library's ids in expected.json.
inline std::string hf_family_fixture_dir(const std::string& family) {
  return source_dir() + "/tests/reference/fixtures/hf_families/" + family;
}

class TempDir {
 public:
  // A fresh directory /tmp/<prefix>XXXXXX.
  explicit TempDir(const std::string& prefix) {
    std::string templ = "/tmp/" + prefix + "XXXXXX";
    path_ = ::mkdtemp(templ.data());
  }
  ~TempDir() {
    if (const char* keep = std::getenv("LEDGERLM_TEST_KEEP_TMP"); keep && *keep && keep[0] != '0')
      return;  // left for a post-mortem, like make_temp_dir's directories
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Names of the entries directly inside, sorted (to check nothing was left behind).
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path_))
      out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  std::string path_;
};

}  // namespace ledgerlm::testing
