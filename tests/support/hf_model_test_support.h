// Shared by the e2e tests of `import --format hf` and `export --format hf` (test_import_hf for
// GPT-2, test_import_hf_llama for Llama/Qwen2): a model file's tensors as raw bytes, to edit and
// write back (a wrong dtype, a missing or renamed tensor), and the one-line refusal they expect.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// One line "ledgerlm: error: ..." in a command's output containing every needle, a non-zero
// exit, and no second error line.
inline void expect_one_error_line(const CommandResult& r, const std::vector<std::string>& needles) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("ledgerlm: error: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  for (const auto& n : needles) EXPECT_NE(line.find(n), std::string::npos) << n << " in: " << line;
  EXPECT_EQ(r.output.find("ledgerlm: error: ", at + 1), std::string::npos) << r.output;
}

// A tensor of a safetensors file as its dtype, shape and raw bytes.
struct RawTensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

// Every tensor of the safetensors file at `path`, by name.
inline std::map<std::string, RawTensor> read_raw(const std::string& path) {
  SafeTensorsFile f = SafeTensorsFile::open(path);
  std::map<std::string, RawTensor> out;
  for (const SafeTensorInfo& info : f.tensors()) {
    RawTensor t{info.dtype, info.shape, {}};
    t.bytes.resize(static_cast<size_t>(info.numel()) * dtype_size(info.dtype));
    f.read_elements(info, 0, info.numel(), t.bytes.data());
    out[info.name] = std::move(t);
  }
  return out;
}

// `tensors` written as the safetensors file `path` (format "pt", as transformers writes).
inline void write_raw(const std::string& path, const std::map<std::string, RawTensor>& tensors) {
  SafeTensorsWriter w;
  for (const auto& [name, t] : tensors) w.add(name, t.dtype, t.shape, t.bytes.data());
  w.set_metadata("format", "pt");
  w.write_atomic(path);
}

// DIR/config.json read, changed by `edit` and written back.
inline void edit_config_json(const std::string& dir,
                             const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json c = nlohmann::json::parse(read_file(dir + "/config.json"));
  edit(c);
  ASSERT_TRUE(write_file(dir + "/config.json", c.dump(2)));
}

// DIR/model.safetensors read, its tensors changed by `edit` and written back.
inline void edit_model_tensors(const std::string& dir,
                               const std::function<void(std::map<std::string, RawTensor>&)>& edit) {
  auto t = read_raw(dir + "/model.safetensors");
  edit(t);
  write_raw(dir + "/model.safetensors", t);
}

// A refused import of run `run` into ROOT/runs left nothing: neither the run's directory nor a
// temporary RUN.tmp... beside it.
inline bool nothing_left(const std::string& root, const std::string& run) {
  if (std::filesystem::exists(root + "/runs/" + run)) return false;
  for (const auto& e : std::filesystem::directory_iterator(root + "/runs"))
    if (e.path().filename().string().rfind(run + ".tmp", 0) == 0) return false;
  return true;
}

// The names both HF test files use unqualified: `using namespace testing::hf_test_names;`.
namespace hf_test_names {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::expect_one_error_line;
using testing::ledgerlm;
using testing::RawTensor;
using testing::read_raw;
using testing::run_command;
using testing::write_raw;
}  // namespace hf_test_names

}  // namespace ledgerlm::testing
