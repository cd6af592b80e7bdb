// Shared test helpers (see test_util.h).
#include "tests/support/test_util.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include <sys/wait.h>

#include "model/base/check.h"

namespace ledgerlm::testing {

bool keep_temp_dirs() {
  const char* env = std::getenv("LEDGERLM_TEST_KEEP_TMP");
  return env != nullptr && env[0] != '\0' && std::string(env) != "0";
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
namespace {

template <class T>
CompareResult compare_impl(const std::string& name, const T* got, const T* ref, int64_t n,
                           double atol, double rtol) {
  CompareResult r;
  double max_ref = 0.0;
  for (int64_t i = 0; i < n; ++i)
    max_ref = std::fmax(max_ref, std::fabs(static_cast<double>(ref[i])));
  r.bound = atol + rtol * max_ref;
  for (int64_t i = 0; i < n; ++i) {
    double d = std::fabs(static_cast<double>(got[i]) - static_cast<double>(ref[i]));
    if (!(d <= r.max_abs_diff) || r.worst < 0) {  // NaN counts as worst
      if (r.worst < 0 || !(d <= r.max_abs_diff)) {
        r.max_abs_diff = std::isnan(d) ? INFINITY : d;
        r.worst = i;
      }
    }
  }
  r.ok = n == 0 || r.max_abs_diff <= r.bound;
  std::ostringstream os;
  os.precision(9);
  os << name << ": max|a-b|=" << r.max_abs_diff << " bound=" << r.bound << " (atol " << atol
     << " + rtol " << rtol << " x max|ref| " << max_ref << ")";
  if (r.worst >= 0)
    os << " worst at [" << r.worst << "]: got " << static_cast<double>(got[r.worst]) << " ref "
       << static_cast<double>(ref[r.worst]);
  r.message = os.str();
  return r;
}

std::vector<std::string>& temp_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}

void remove_temp_dirs() {
  if (keep_temp_dirs()) {
    // Kept for a post-mortem (scripts/gpu/gpu_check.sh archives them with their metrics).
    for (const auto& d : temp_dirs()) std::fprintf(stderr, "kept temp dir: %s\n", d.c_str());
    return;
  }
  for (const auto& d : temp_dirs()) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
}

}  // namespace

CompareResult compare_tensor(const std::string& name, const double* got, const double* ref,
                             int64_t n, double atol, double rtol) {
  return compare_impl(name, got, ref, n, atol, rtol);
}
CompareResult compare_tensor(const std::string& name, const float* got, const float* ref, int64_t n,
                             double atol, double rtol) {
  return compare_impl(name, got, ref, n, atol, rtol);
}

std::string make_temp_dir(const std::string& prefix) {
  static std::once_flag once;
  std::call_once(once, [] {
    temp_dirs();  // construct the list before registering: it must outlive the atexit hook
    std::atexit(remove_temp_dirs);
  });
  std::string templ = "/tmp/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  if (!dir) return "";
  temp_dirs().push_back(dir);
  return dir;
}

CommandResult run_command(const std::string& command) {
  CommandResult r;
  std::string full = command + " 2>&1";
  FILE* pipe = popen(full.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t got;
  while ((got = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), got);
  int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A relocated build (the GPU bundle, scripts/gpu/gpu_bundle.sh) names its binary and source tree in
// the environment; a normal build uses the paths compiled in.
std::string ledgerlm_binary() {
  const char* env = std::getenv("LEDGERLM_TEST_BINARY");
  return env && *env ? env : LEDGERLM_BINARY;
}
CommandResult ledgerlm(const std::string& args) {
  return run_command(ledgerlm_binary() + " " + args);
}
std::string source_dir() {
  const char* env = std::getenv("LEDGERLM_TEST_SOURCE_DIR");
  return env && *env ? env : LEDGERLM_SOURCE_DIR;
}
std::string python3() {
  return LEDGERLM_PYTHON;
}
std::string mpirun_path() {
#if defined(LEDGERLM_MPIRUN)
  return LEDGERLM_MPIRUN;
#else
  return "";
#endif
}
std::string dist_runner() {
#if defined(LEDGERLM_DIST_RUNNER)
  return LEDGERLM_DIST_RUNNER;
#else
  return "";
#endif
}

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  return static_cast<bool>(f);
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace ledgerlm::testing
