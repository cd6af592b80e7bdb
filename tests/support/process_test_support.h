// Shared by the tests that run ledgerlm as a background process and stop or kill it (test_run_lock,
// test_resume_crash, test_disk_full): start a command, wait for metrics records, wait for the exit,
// read a run's losses bit for bit and check its metrics.jsonl is one clean run.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// Runs `command` through /bin/sh in the background (its output to `log`); returns the pid of the
// ledgerlm process itself (the shell execs it).
inline pid_t start_background(const std::string& command, const std::string& log) {
  const std::string cmd = "exec " + command + " > " + log + " 2>&1";
  const pid_t pid = fork();
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits up to `seconds` for the process to end; returns its wait status, or -1 on timeout (the
// process is then killed).
inline int wait_exit(pid_t pid, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  int status = 0;
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
    if (waitpid(pid, &status, WNOHANG) == pid) return status;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// Loss records in RUN/metrics.jsonl (0 if there is none yet).
inline size_t loss_records(const std::string& run_dir) {
  std::istringstream in(read_file(run_dir + "/metrics.jsonl"));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) n += line.find("\"loss\"") != std::string::npos;
  return n;
}

inline bool wait_loss_records(const std::string& run_dir, size_t count, double seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  while (loss_records(run_dir) < count) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

// step -> bit pattern of its loss. Also checks that metrics.jsonl is one clean run: every line
// a JSON object ending in a newline, and no step's loss logged twice.
inline std::map<int64_t, uint64_t> clean_losses(const std::string& run_dir) {
  const std::string text = read_file(run_dir + "/metrics.jsonl");
  EXPECT_TRUE(text.empty() || text.back() == '\n') << run_dir << ": last record cut";
  std::map<int64_t, uint64_t> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
    EXPECT_TRUE(rec.is_object()) << run_dir << ": unparseable line: " << line;
    if (!rec.is_object() || !rec.contains("loss")) continue;
    const double loss = rec["loss"].get<double>();
    uint64_t bits;
    std::memcpy(&bits, &loss, 8);
    const int64_t step = rec["step"].get<int64_t>();
    EXPECT_EQ(out.count(step), 0u) << run_dir << ": step " << step << " logged twice";
    out[step] = bits;
  }
  return out;
}

// Names under `dir` (recursively) that are temporaries: *.tmp files, .tmp_* and .old_* entries.
inline std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp", 0) == 0 || name.rfind(".old", 0) == 0 ||
        (name.size() > 4 && name.compare(name.size() - 4, 4, ".tmp") == 0))
      out.push_back(e.path().string());
  }
  return out;
}

}  // namespace ledgerlm::testing
