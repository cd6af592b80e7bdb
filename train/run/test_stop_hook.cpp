// The LEDGERLM_TEST_STOP_IN test hook (see test_stop_hook.h).
#include "train/run/test_stop_hook.h"

#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ledgerlm {

void test_stop_in(int rank, const char* phase) {
  const char* v = std::getenv("LEDGERLM_TEST_STOP_IN");
  if (v == nullptr) return;
  int at_rank = -1;
  char at_phase[32] = "";
  if (std::sscanf(v, "%d:%31s", &at_rank, at_phase) != 2) return;
  if (at_rank != rank || std::strcmp(at_phase, phase) != 0) return;
  // The first time only: a rank continued by hand (SIGCONT) then runs on as usual.
  static std::atomic<bool> stopped{false};
  if (stopped.exchange(true)) return;
  ::raise(SIGSTOP);
}

}  // namespace ledgerlm
