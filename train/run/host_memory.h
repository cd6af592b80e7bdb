// How much more memory this process (and its siblings on the host) can take before something
// stops it: the tightest of the limits Linux applies, each read the moment it is asked for.
//   - MemAvailable (/proc/meminfo): what the kernel estimates can be handed out without swapping;
//   - the memory cgroup's limit minus its usage, v2 (memory.max - memory.current, over this
//     process's cgroup and its ancestors) or v1 (memory.limit_in_bytes - memory.usage_in_bytes),
//     the usage counted without reclaimable inactive page cache (memory.stat);
//   - RLIMIT_AS (`ulimit -v`) minus the process's virtual size (VmSize): a limit on address
//     space, which allocations grow one for one;
//   - LEDGERLM_MEMORY_LIMIT_BYTES, when set: a limit stated by hand, for tests and for containers
//     whose limits the process cannot see. It only ever tightens the others.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ledgerlm {

struct MemoryLimit {
  std::string source;     // "MemAvailable", "cgroup v2 memory.max", "RLIMIT_AS", ...
  int64_t available = 0;  // bytes this process may still take under it
  int64_t limit = 0;      // the limit itself (MemAvailable: the same figure)
};

// Every limit in force (none of them is always there: a limit that is not set is left out).
std::vector<MemoryLimit> host_memory_limits();
// The tightest of them; source empty when none could be read.
MemoryLimit host_memory_tightest(const std::vector<MemoryLimit>& limits);

}  // namespace ledgerlm
