// Shared by the data-parallel tests (test_dist_*): mpirun launches (oversubscribed, one thread
// per rank), several `ledgerlm train` runs per launch through the dist runner, a small prepared
// corpus, and reading a run's losses and final checkpoint back.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// Skips the calling test (with the reason) where this build or machine cannot run mpirun.
#define LEDGERLM_REQUIRE_MPI()                                                                    \
  do {                                                                                            \
    if (::ledgerlm::testing::mpirun_path().empty() || ::ledgerlm::testing::dist_runner().empty()) \
      GTEST_SKIP() << "skipped: this build has no MPI (libopenmpi-dev) or no mpirun";             \
  } while (0)

// Whether the ranks of the next launches check for leaks at exit (sanitizer builds only). OpenMPI's
// one-time allocations are suppressed by library name (tests/lsan.supp), which needs whole
// allocation stacks; its plugins have no frame pointers, so a leak-checked rank must use the slow
// unwinder on every malloc, which makes it 4-6x slower (a 12-run launch: 13.8 s against 2.5 s).
// So the ranks are leak-checked only in the tests that hold a RankLeakCheck: they cover the MPI
// lifecycle of a whole run (start, every collective, checkpoints, resume, exit); every other
// launch keeps AddressSanitizer's and UBSan's checks in the ranks, without the leak check. The
// training code the ranks run is leak-checked in one process by the unit and e2e tests too
// (ZeRO's stages included: TrainZeroMachinery forces them on one rank).
inline bool& rank_leak_check() {
  static bool on = false;
  return on;
}
struct RankLeakCheck {
  RankLeakCheck() { rank_leak_check() = true; }
  ~RankLeakCheck() { rank_leak_check() = false; }
  RankLeakCheck(const RankLeakCheck&) = delete;
  RankLeakCheck& operator=(const RankLeakCheck&) = delete;
};

// `mpirun -np N` with the settings every test uses (root allowed, oversubscribed, one thread).
// Sanitizer settings travel to the ranks. A leak-checked rank (above) uses the slow unwinder and
// keeps OpenMPI's plugins loaded at exit (else their frames are unknown at leak-check time and
// cannot be matched); any other rank runs with detect_leaks=0.
inline std::string sanitizer_exports() {
  std::string p;
  if (std::getenv("UBSAN_OPTIONS") != nullptr) p += "-x UBSAN_OPTIONS ";
  if (const char* asan = std::getenv("ASAN_OPTIONS"))
    p += rank_leak_check() ? std::string("-x ASAN_OPTIONS ")
                           : std::string("-x ASAN_OPTIONS=") + asan + ":detect_leaks=0 ";
  const char* lsan = std::getenv("LSAN_OPTIONS");
  if (lsan != nullptr && rank_leak_check())
    p += std::string("-x LSAN_OPTIONS=") + lsan +
         ":fast_unwind_on_malloc=0 --mca mca_base_component_disable_dlclose 1 ";
  return p;
}

inline std::string mpirun_prefix(int np) {
  return mpirun_path() + " --allow-run-as-root --oversubscribe -np " + std::to_string(np) +
         " -x OMP_NUM_THREADS=1 -x OMP_WAIT_POLICY=PASSIVE -x OPENBLAS_NUM_THREADS=1 " +
         sanitizer_exports();
}

// Runs every line of `runs` (train flags) in one launch of `np` ranks.
inline CommandResult run_many(int np, const std::vector<std::string>& runs,
                              const std::string& dir) {
  static int counter = 0;
  std::filesystem::create_directories(dir);
  const std::string list = dir + "/runs_" + std::to_string(counter++) + ".txt";
  std::string text;
  for (const std::string& r : runs) text += r + "\n";
  EXPECT_TRUE(write_file(list, text)) << list;
  return run_command(mpirun_prefix(np) + dist_runner() + " " + list + " 2>&1");
}

// A per-step figure of a run's metrics.jsonl ("loss", "grad_norm", ...), in step order.
inline std::vector<double> run_series(const std::string& run_dir, const std::string& key) {
  std::vector<double> out;
  std::ifstream f(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(f, line);) {
    const nlohmann::json r = nlohmann::json::parse(line, nullptr, false);
    if (r.is_object() && r.contains("loss") && r.contains(key)) out.push_back(r[key].get<double>());
  }
  return out;
}
inline std::vector<double> run_losses(const std::string& run_dir) {
  return run_series(run_dir, "loss");
}

// Every tensor of the run's latest checkpoint ("model/NAME", "optimizer/NAME", ...) as doubles.
inline std::map<std::string, std::vector<double>> run_tensors(const std::string& run_dir) {
  std::map<std::string, std::vector<double>> out;
  const CheckpointReader ckpt = CheckpointReader::open(checkpoint_resolve(run_dir));
  for (const char* file : {"model", "compute", "optimizer"}) {
    for (const std::string& name : ckpt.tensor_names(file)) {
      const SafeTensorInfo& info = ckpt.info(file, name);
      const int64_t n = info.numel();
      std::vector<double> v(static_cast<size_t>(n));
      if (info.dtype == DType::kU8) {  // 8-bit codes: compared as code values
        std::vector<uint8_t> raw(static_cast<size_t>(n));
        ckpt.read(file, name, info.dtype, info.shape, 0, n, raw.data());
        for (int64_t i = 0; i < n; ++i) v[i] = raw[i];
      } else {
        const std::vector<float> f = ckpt.read_f32(file, name, info.shape);
        for (int64_t i = 0; i < n; ++i) v[i] = f[i];
      }
      out[std::string(file) + "/" + name] = std::move(v);
    }
  }
  return out;
}

}  // namespace ledgerlm::testing

namespace ledgerlm::testing {

// A command started in the background: its pid (the command itself, e.g. mpirun), and its exit
// code once it ended. Output goes to `log`.
struct Background {
  std::string dir;
  int pid = -1;
  std::string log() const { return read_file(dir + "/out.log"); }
  // Waits up to `seconds`; returns the exit code, or -1 on timeout.
  int wait(double seconds) const {
    for (int i = 0; i < static_cast<int>(seconds * 10); ++i) {
      const std::string rc = read_file(dir + "/rc");
      if (!rc.empty()) return std::stoi(rc);
      run_command("sleep 0.1");
    }
    return -1;
  }
  void signal(const char* name) const {
    run_command("kill -" + std::string(name) + " " + std::to_string(pid));
  }
};

inline Background start_background(const std::string& command, const std::string& dir) {
  Background b;
  b.dir = dir;
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir + "/rc");
  std::filesystem::remove(dir + "/pid");
  // A wrapper script: `command` runs as a direct child, so $! is its own pid (mpirun's).
  write_file(dir + "/run.sh", "#!/bin/bash\ncd " + dir + "\n" + command +
                                  " > out.log 2>&1 &\necho $! > pid.tmp && mv pid.tmp pid\n"
                                  "wait $!\necho $? > rc.tmp && mv rc.tmp rc\n");
  run_command("setsid bash " + dir + "/run.sh > /dev/null 2>&1 &");
  for (int i = 0; i < 100 && read_file(dir + "/pid").empty(); ++i) run_command("sleep 0.05");
  const std::string pid = read_file(dir + "/pid");
  b.pid = pid.empty() ? -1 : std::stoi(pid);
  return b;
}

// Waits until the run's metrics.jsonl has a record of step >= `step` (true) or `seconds` pass.
inline bool wait_for_step(const std::string& run_dir, int64_t step, double seconds) {
  for (int i = 0; i < static_cast<int>(seconds * 10); ++i) {
    const std::vector<double> losses = run_losses(run_dir);
    if (static_cast<int64_t>(losses.size()) >= step) return true;
    run_command("sleep 0.1");
  }
  return false;
}

}  // namespace ledgerlm::testing
