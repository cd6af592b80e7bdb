// precision.subnormals on the CPU backend's threads (see cpu_subnormals.h).
#include "model/backend/cpu/cpu_subnormals.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "model/base/subnormals.h"

namespace ledgerlm::cpu {

void cpu_subnormals_apply(int threads) {
  subnormals_adopt();
  // Every thread of the team, not the loop iterations of a work-sharing construct: a parallel
  // region runs its body once on each of its threads.
#pragma omp parallel num_threads(std::max(1, threads))
  subnormals_adopt();
}

std::string cpu_subnormals_state(int threads) {
  if (!subnormals_supported()) return "keep (no flush-to-zero control on this CPU)";
  // The team's thread 0 is the caller.
  const int n = std::max(1, threads);
  std::vector<char> flushes(static_cast<size_t>(n), 0);
  int total = 0;
#pragma omp parallel num_threads(n)
  {
    flushes[static_cast<size_t>(omp_get_thread_num())] = subnormals_thread_flushes() ? 1 : 0;
#pragma omp single
    total = omp_get_num_threads();
  }
  const int on = static_cast<int>(std::count(flushes.begin(), flushes.begin() + total, 1));
  if (on == total) return "flush";
  if (on == 0) return "keep";
  return "mixed (" + std::to_string(on) + " of " + std::to_string(total) + " threads flush)";
}

}  // namespace ledgerlm::cpu
