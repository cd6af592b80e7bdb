// The stop signals while a run trains: they are left to the thread with the handler's alternate
// stack. OpenMP's workers (where the GEMM kernels run) block them once the handlers are installed,
// and a process-directed signal still reaches the handler.
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <vector>

#include "train/run/stop_signal.h"

namespace ledgerlm {
namespace {

// Per OpenMP thread of a team of `threads`: whether it blocks SIGINT, SIGTERM and SIGUSR1 (all
// three: 1, none: 0, some: -1).
std::vector<int> stop_signals_blocked(int threads) {
  std::vector<int> blocked(static_cast<size_t>(threads), -2);
#pragma omp parallel num_threads(threads)
  {
    sigset_t mask;
    sigemptyset(&mask);
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    const int n =
        sigismember(&mask, SIGINT) + sigismember(&mask, SIGTERM) + sigismember(&mask, SIGUSR1);
    blocked[static_cast<size_t>(omp_get_thread_num())] = n == 3 ? 1 : n == 0 ? 0 : -1;
  }
  return blocked;
}

TEST(StopSignal, WorkersBlockTheStopSignalsAndTheMainThreadTakesThem) {
  const int threads = 3;  // more than one worker even on a 2-core machine
  omp_set_num_threads(threads);
  ASSERT_EQ(stop_signals_blocked(threads), std::vector<int>(threads, 0)) << "before install";
  stop_signal_install();
  const std::vector<int> after = stop_signals_blocked(threads);
  EXPECT_EQ(after[0], 0) << "the main thread must keep the stop signals";
  for (int t = 1; t < threads; ++t) EXPECT_EQ(after[t], 1) << "OpenMP worker " << t;
  // Sent to the process (as mpirun and a shell's kill do): the handler runs, on this thread.
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);
  EXPECT_EQ(stop_signal_pending(), SIGUSR1);
  stop_signal_restore();
}

}  // namespace
}  // namespace ledgerlm
