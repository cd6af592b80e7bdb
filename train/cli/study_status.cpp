// `ledgerlm study status DIR`: where each run of a study stands, from its run directory, the run
// lock and (when the manifest records Slurm jobs and squeue is on PATH) the Slurm queue:
//   finished     summary.json says so
//   running      the run's lock (runs/NAME/.lock) is held on this host, or squeue says RUNNING
//   queued       squeue lists its array task as waiting (PENDING, REQUEUED, ...)
//   failed       summary.json says so, with the error line the trainer recorded
//   stopped      summary.json says so (or it has a checkpoint and no summary: killed), resumable
//   not started  nothing of it yet
// The lock is looked up in /proc/locks rather than taken: taking it, even for a moment, would
// refuse a run starting at that moment.
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/base/check.h"
#include "train/cli/commands.h"
#include "train/cli/study_plan.h"
#include "train/cli/study_slurm.h"
#include "train/run/run_summary.h"

namespace ledgerlm {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "MAJOR:MINOR:INODE" of every flock(2) held on this host (/proc/locks), as its lines write them.
std::set<std::string> held_flocks() {
  std::set<std::string> out;
  std::ifstream in("/proc/locks");
  std::string line;
  while (std::getline(in, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF" (a "->" marks a waiter, not a holder).
    std::stringstream f(line);
    std::string id, kind, mode, rw, pid, where;
    if (!(f >> id >> kind)) continue;
    if (kind == "->" || kind != "FLOCK") continue;
    if (f >> mode >> rw >> pid >> where) out.insert(where);
  }
  return out;
}

// The /proc/locks key of PATH's inode ("" when it does not exist). /proc/locks writes the device
// as hex major:minor and the inode in decimal.
std::string lock_key(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%02x:%02x:%llu", major(st.st_dev), minor(st.st_dev),
                static_cast<unsigned long long>(st.st_ino));
  return buf;
}

}  // namespace

int command_study_status(const StudyStatusCommand& cmd) {
  const json manifest = study_manifest_read(cmd.dir);
  std::string squeue_error;
  const std::map<std::string, std::string> queue = study_slurm_queue(manifest, &squeue_error);
  if (!squeue_error.empty())
    std::printf("study %s: squeue failed (%s): queued runs show as not started\n", cmd.dir.c_str(),
                squeue_error.c_str());
  const std::set<std::string> flocks = held_flocks();
  static const std::vector<std::string> order = {"finished", "running", "queued",
                                                 "stopped",  "failed",  "not started"};
  std::map<std::string, int> count;
  size_t width = 0;
  for (const json& r : manifest["runs"])
    width = std::max(width, r["name"].get<std::string>().size());
  for (const json& r : manifest["runs"]) {
    const std::string name = r["name"];
    const std::string run_dir = cmd.dir + "/runs/" + name;
    const json s = run_summary_read(run_dir);
    const std::string status = s.is_object() ? s.value("status", std::string()) : std::string();
    const auto q = queue.find(name);
    const std::string slurm = q == queue.end() ? "" : q->second;
    const std::string key = lock_key(run_dir + "/.lock");
    std::string state, detail;
    if (status == "finished") {
      state = "finished";
    } else if ((!key.empty() && flocks.count(key)) || slurm == "RUNNING" || slurm == "COMPLETING") {
      state = "running";
    } else if (study_slurm_is_queued(slurm)) {
      state = "queued";
      detail = slurm;
    } else if (status == "failed") {
      state = "failed";
      detail = s.value("failed", std::string("(no error recorded)"));
    } else if (status == "stopped") {
      state = "stopped";
      detail = s.value("stopped", std::string());
    } else if (fs::is_directory(run_dir + "/ckpt") && !fs::is_empty(run_dir + "/ckpt")) {
      state = "stopped";
      detail = "killed: no summary; resumes from its last checkpoint";
    } else {
      state = "not started";
    }
    if (state == "running" && !slurm.empty()) detail = "slurm";
    ++count[state];
    std::printf("%-*s  %s%s%s\n", static_cast<int>(width), name.c_str(), state.c_str(),
                detail.empty() ? "" : ": ", detail.c_str());
  }
  std::string total;
  for (const std::string& s : order) {
    if (!count[s]) continue;
    total += (total.empty() ? "" : ", ") + std::to_string(count[s]) + " " + s;
  }
  std::printf("study %s: %zu run(s): %s\n", cmd.dir.c_str(), manifest["runs"].size(),
              total.empty() ? "none" : total.c_str());
  return 0;
}

}  // namespace ledgerlm
