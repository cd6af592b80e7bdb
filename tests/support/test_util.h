// Helpers shared by the tests: per-tensor comparison with a stated tolerance, temp dirs,
// running the ledgerlm binary and the PyTorch reference.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace ledgerlm::testing {

// The message of the ledgerlm::Error `f` throws, "" when it throws none.
std::string error_of(const std::function<void()>& f);

// max|a-b| <= atol + rtol * max|ref| over the tensor. On failure the message names the tensor,
// the worst element's index, both values and the bound.
struct CompareResult {
  bool ok = true;
  double max_abs_diff = 0.0;
  double bound = 0.0;
  int64_t worst = -1;
  std::string message;
};
CompareResult compare_tensor(const std::string& name, const double* got, const double* ref,
                             int64_t n, double atol, double rtol);
CompareResult compare_tensor(const std::string& name, const float* got, const float* ref, int64_t n,
                             double atol, double rtol);

// A fresh empty directory under /tmp, removed at process exit unless LEDGERLM_TEST_KEEP_TMP=1
// (then each kept path is printed to stderr at exit, for the training runs' files).
std::string make_temp_dir(const std::string& prefix);
// LEDGERLM_TEST_KEEP_TMP is set (and not 0): test temp dirs are left in place.
bool keep_temp_dirs();

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};
// Runs a shell command, capturing its output.
CommandResult run_command(const std::string& command);
// `ledgerlm ARGS` (ARGS as the shell splits them), its output and exit code.
CommandResult ledgerlm(const std::string& args);
// Path of the ledgerlm binary, the source dir, and the python interpreter with torch.
std::string ledgerlm_binary();
std::string source_dir();
std::string python3();
// mpirun and tests/dist/dist_runner of this build; empty in a build without MPI.
std::string mpirun_path();
std::string dist_runner();

bool write_file(const std::string& path, const std::string& text);
std::string read_file(const std::string& path);

}  // namespace ledgerlm::testing
