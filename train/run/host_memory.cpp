// The memory limits in force on this process (see host_memory.h).
#include "train/run/host_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

// A limit this large is "no limit" (cgroup v1 writes 2^63 rounded down to a page).
constexpr int64_t kUnlimited = int64_t{1} << 60;

// The first number after `key` in a "key value [kB]" file (/proc/meminfo, /proc/self/status,
// memory.stat), in bytes when it says kB; -1 when absent.
int64_t keyed_bytes(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, key.size(), key) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    long long value = -1;
    std::string unit;
    if (!(fields >> value)) return -1;
    fields >> unit;
    return unit == "kB" ? value * 1024 : value;
  }
  return -1;
}

// A file holding one number ("max" and unreadable files: -1).
int64_t file_number(const std::string& path) {
  std::ifstream in(path);
  long long value = -1;
  if (!(in >> value)) return -1;
  return value;
}

// The cgroup path of this process in hierarchy `controller` ("" for v2's "0::"), or "" if none.
std::string cgroup_path(const std::string& controller) {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string names = line.substr(a + 1, b - a - 1);
    bool match = controller.empty() ? line.compare(0, a, "0") == 0 && names.empty() : false;
    std::istringstream list(names);
    for (std::string n; !controller.empty() && std::getline(list, n, ',');)
      match = match || n == controller;
    if (match) return line.substr(b + 1);
  }
  return "";
}

// The directories from this process's cgroup up to the hierarchy's mount point (inside a cgroup
// namespace or container the path in /proc/self/cgroup may not exist under the mount: then the
// mount point alone, which is the container's own cgroup).
std::vector<std::string> cgroup_dirs(const std::string& mount, std::string path) {
  std::vector<std::string> dirs;
  while (!path.empty() && path != "/") {
    if (std::ifstream(mount + path + "/cgroup.procs").good()) dirs.push_back(mount + path);
    path = path.substr(0, path.rfind('/'));
  }
  dirs.push_back(mount);
  return dirs;
}

// Limit - usage for one cgroup directory, the usage without inactive page cache, which the
// kernel reclaims before it fails an allocation.
void add_cgroup(std::vector<MemoryLimit>* out, const std::string& dir, const char* limit_file,
                const char* usage_file, const char* inactive_key, const std::string& source) {
  const int64_t limit = file_number(dir + "/" + limit_file);
  if (limit <= 0 || limit >= kUnlimited) return;
  int64_t usage = file_number(dir + "/" + usage_file);
  if (usage < 0) return;
  const int64_t inactive = keyed_bytes(dir + "/memory.stat", inactive_key);
  if (inactive > 0 && inactive < usage) usage -= inactive;
  out->push_back({source + " (" + dir + ")", std::max<int64_t>(0, limit - usage), limit});
}

}  // namespace

std::vector<MemoryLimit> host_memory_limits() {
  std::vector<MemoryLimit> out;
  const int64_t avail = keyed_bytes("/proc/meminfo", "MemAvailable:");
  if (avail >= 0) out.push_back({"MemAvailable (/proc/meminfo)", avail, avail});
  // cgroup v2 (unified) and v1 (the memory controller's own hierarchy).
  for (const std::string& dir : cgroup_dirs("/sys/fs/cgroup", cgroup_path("")))
    add_cgroup(&out, dir, "memory.max", "memory.current", "inactive_file ", "cgroup v2 memory.max");
  for (const std::string& dir : cgroup_dirs("/sys/fs/cgroup/memory", cgroup_path("memory")))
    add_cgroup(&out, dir, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file ",
               "cgroup v1 memory.limit_in_bytes");
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    const int64_t limit = static_cast<int64_t>(rl.rlim_cur);
    const int64_t vsize = std::max<int64_t>(0, keyed_bytes("/proc/self/status", "VmSize:"));
    out.push_back(
        {"RLIMIT_AS (ulimit -v) minus the virtual size " + std::to_string(vsize) + " bytes",
         std::max<int64_t>(0, limit - vsize), limit});
  }
  if (const char* env = std::getenv("LEDGERLM_MEMORY_LIMIT_BYTES"); env != nullptr && *env) {
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    LLM_REQUIRE(end != env && *end == '\0' && v > 0 && v < 9.2e18,
                "LEDGERLM_MEMORY_LIMIT_BYTES: expected a positive byte count (got '", env, "')");
    const int64_t limit = static_cast<int64_t>(v);
    out.push_back({"LEDGERLM_MEMORY_LIMIT_BYTES", limit, limit});
  }
  return out;
}

MemoryLimit host_memory_tightest(const std::vector<MemoryLimit>& limits) {
  MemoryLimit best;
  for (const MemoryLimit& l : limits)
    if (best.source.empty() || l.available < best.available) best = l;
  return best;
}

}  // namespace ledgerlm
