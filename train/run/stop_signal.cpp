// Signal handlers and the STOP file (see stop_signal.h). The handler does only async-signal-safe
// work: it stores the signal number and writes one fixed line to stderr.
#include "train/run/stop_signal.h"

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

namespace ledgerlm {
namespace {

volatile sig_atomic_t g_pending = 0;
bool g_installed = false;
// The handler's notice, composed before the handlers are installed (a handler may only write).
char g_notice[2048];
size_t g_notice_len = 0;
struct sigaction g_old_int, g_old_term, g_old_usr1;

void on_signal(int sig) {
  if (sig == SIGINT && g_pending == SIGINT) {
    // Second Ctrl-C: the user does not want to wait for the step and the save.
    ::signal(SIGINT, SIG_DFL);
    ::raise(SIGINT);
    return;
  }
  if (g_pending == 0) g_pending = sig;
  ssize_t ignored = ::write(STDERR_FILENO, g_notice, g_notice_len);
  (void)ignored;
}

}  // namespace

void stop_signal_install(const std::string& resume_hint, bool announce) {
  if (g_installed) return;
  std::string notice =
      "\nledgerlm: stop requested: finishing this step and saving a checkpoint (Ctrl-C again "
      "aborts without saving)\n";
  if (!resume_hint.empty()) notice += "ledgerlm: " + resume_hint + "\n";
  if (!announce) notice.clear();
  g_notice_len = std::min(notice.size(), sizeof g_notice);
  std::memcpy(g_notice, notice.data(), g_notice_len);
  // The handler runs on a stack of its own: a signal frame pushed onto the interrupted code's
  // stack clobbers whatever that code keeps below its stack pointer, and oneDNN's JIT-compiled
  // AVX-512 GEMM kernels were seen to corrupt the heap when a SIGTERM landed inside them.
  // A process-directed signal goes to any thread that does not block it, so the OpenMP workers
  // (which run those kernels too) block the stop signals: they are left to this thread, the one
  // with the alternate stack. libgomp keeps its workers from one parallel region to the next, so
  // their masks hold for the run's regions (no wider than the pool made here).
  sigset_t stop_set;
  sigemptyset(&stop_set);
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) sigaddset(&stop_set, sig);
#pragma omp parallel num_threads(omp_get_max_threads())
  if (omp_get_thread_num() != 0) ::pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  static char alt_stack[64 * 1024];
  stack_t ss;
  std::memset(&ss, 0, sizeof ss);
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  ::sigaltstack(&ss, nullptr);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART | SA_ONSTACK;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  ::sigaction(SIGUSR1, &sa, &g_old_usr1);
  g_installed = true;
}

void stop_signal_restore() {
  if (!g_installed) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGUSR1, &g_old_usr1, nullptr);
  g_installed = false;
}

int stop_signal_pending() {
  return g_pending;
}

std::string stop_check(const std::string& run_dir) {
  const int sig = g_pending;
  if (sig != 0) {
    const char* name = sig == SIGINT    ? "SIGINT"
                       : sig == SIGTERM ? "SIGTERM"
                       : sig == SIGUSR1 ? "SIGUSR1"
                                        : "a signal";
    return std::string("signal ") + name;
  }
  const std::string stop_file = run_dir + "/STOP";
  std::error_code ec;
  if (std::filesystem::exists(stop_file, ec)) return "STOP file " + stop_file;
  return "";
}

void stop_file_clear(const std::string& run_dir) {
  std::error_code ec;
  std::filesystem::remove(run_dir + "/STOP", ec);
}

}  // namespace ledgerlm
