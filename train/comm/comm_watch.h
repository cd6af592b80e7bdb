// The collective watchdog's policy, shared by every Comm that talks to other ranks: how long a
// rank waits for the others at a collective, what the job is doing (named in the message when the
// wait ends the job), how a waiting rank sleeps instead of spinning, and a thread that watches a
// collective every rank has entered, while the main thread is blocked inside it.
//
// The rule: the timeout in effect is max(dist.timeout_s, kFloorFactor x the slowest training
// step, evaluation, weights save or checkpoint save this job has measured so far). A healthy
// collective waits at most for the slowest rank's share of one such phase, so a key set for
// short steps cannot end a job whose steps later turn long; the key alone applies at start-up.
//
// The transport does the rest: the MPI Comm (comm_mpi_gate.h) waits for every rank's arrival
// with a non-blocking barrier polled under PollBackoff and, on expiry, asks every rank where it
// is, so that the line names the ranks that did not take part; the Backstop's hook does the same
// from its thread while the main thread is blocked in the collective itself. The NCCL Comm
// (comm_nccl.cpp) passes the MPI Comm's barrier (its gate) before each NCCL call, polls
// ncclCommGetAsyncError under the same PollBackoff and limit, and watches its queued collectives
// from a thread of its own (NCCL cannot say which rank stalled: unattributed_message).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ledgerlm {

// Monotonic seconds (steady clock), the watchdog's one time base.
double comm_now_seconds();

// The time a wait has lasted while this process ran: a wall-clock step between two ticks longer
// than kMaxStep (the process was stopped: SIGSTOP, a suspended job; or starved of CPU) counts
// as kMaxStep. A job stopped and continued as a whole thus finds no wait expired, and a stopped
// rank that mpirun continues (before it kills it) does not report the others as late.
class AwakeClock {
 public:
  static constexpr double kMaxStep = 0.25;
  explicit AwakeClock(double now = comm_now_seconds()) : last_(now) {}
  // Seconds awake since construction, counting up to `now`.
  double tick(double now = comm_now_seconds());

 private:
  double last_, elapsed_ = 0.0;
};

// What the job is doing, for the messages and the floor of the timeout.
enum class CommPhase {
  kStartup,     // config, data, checkpoint and model set-up: the key alone applies
  kTraining,    // a training step (its collectives, and the stop check after it)
  kEvaluation,  // an evaluation after a step
  kWeights,     // a weights save (model.safetensors)
  kCheckpoint,  // a checkpoint save
  kFinish,      // the run's summary after the last step
};

class CommWatch {
 public:
  // The floor: the timeout in effect is at least this many times the slowest phase so far.
  static constexpr double kFloorFactor = 5.0;
  // A run starts: the key's value (dist.timeout_s), phase start-up, no phase measured yet.
  void begin_run(double timeout_s, double now = comm_now_seconds());
  // The job begins `phase` (of step `step`); the phase before it, if a measured kind, ends here.
  void begin(CommPhase phase, int64_t step, double now = comm_now_seconds());

  double timeout_key() const { return timeout_s_; }
  double slowest_phase() const { return slowest_s_; }
  // The timeout in effect now: max(timeout_key(), kFloorFactor x slowest_phase()).
  double limit() const;
  // "training step 12", "checkpoint save at step 12", "start-up", ...
  std::string where() const;
  // Why limit() is what it is: "dist.timeout_s = 30" or "5 x the slowest step so far, 2.1 s".
  std::string limit_reason() const;
  // The rule in words, for the run's header.
  std::string rule_text() const;

  // The one-line reasons a job ends (without "ledgerlm: error: "): ranks that did not take part
  // in `collective` (did not reach it, or stalled inside it) within the limit...
  std::string missing_message(const std::vector<int>& ranks, const char* collective) const;
  // ...or every rank answered but the collective did not complete; `positions` (each rank's
  // count of collectives) is named when the ranks disagree on it.
  std::string stuck_message(const char* collective, const std::vector<uint64_t>& positions) const;
  // ...or a transport that does not say which rank is missing (NCCL: a collective queued on the
  // device that did not complete) left `rank` waiting in `collective` past the limit.
  std::string unattributed_message(int rank, const char* transport, const char* collective) const;
  // The warning of a rank whose wait exceeded the limit but ended (every rank arrived).
  std::string late_message(int rank, const char* collective, double waited_s) const;

 private:
  double timeout_s_ = 600.0;                        // the trainer sets dist.timeout_s (begin_run)
  double slowest_s_ = 0.0;                          // the slowest measured phase so far
  CommPhase slowest_phase_ = CommPhase::kTraining;  // and its kind
  CommPhase phase_ = CommPhase::kStartup;
  int64_t step_ = 0;
  double phase_start_ = 0.0;  // comm_now_seconds() when the current phase began
};

// "1", "1 and 3", "1, 2 and 3".
std::string comm_rank_list(const std::vector<int>& ranks);

// The sleeps between two polls of a wait: none while the wait is young (kSpinSeconds: ranks that
// arrive nearly together, most waits of a balanced step, meet without a sleep's wake-up delay),
// then 1/kFraction of the time waited so far, at least kMinSleep and at most kMaxSleep. A rank
// that waits long thus polls 1000 times a second (a few percent of a core), and one that waits
// for a few milliseconds notices the last arrival about 1/16 of its wait late.
class PollBackoff {
 public:
  static constexpr double kSpinSeconds = 100e-6;
  static constexpr double kFraction = 16.0;
  static constexpr double kMinSleep = 20e-6;
  static constexpr double kMaxSleep = 1e-3;
  // The sleep after a wait of `waited_s` seconds so far (0: poll again at once).
  static double sleep_for(double waited_s);
  static void pause(double waited_s);
  // A sleep of `s` seconds, as precise as the thread's timer slack allows (see pause()).
  static void sleep(double s);
};

// A section the main thread spends blocked inside a collective, as the Backstop's thread sees it.
struct BlockedSection {
  CommWatch watch;              // a copy at arm(): the phase to name, the limit
  const char* collective = "";  // a string literal: "all-reduce", ...
  double awake = 0.0;           // seconds inside the section so far (AwakeClock)
  // The hook's own state for this section: when to look next, censuses that found every rank.
  double next_check = 0.0;
  int quiet_censuses = 0;
};

// A thread that watches the sections the main thread spends inside a collective that every
// rank has entered: the main thread, blocked in the transport's call, cannot act if a rank
// stalls inside the transfer (or stops while waiting to start it). While a section lasts, the
// thread calls the transport's hook every kCheckSeconds; the hook answers the other ranks'
// questions and, past the limit, finds the ranks that stalled and ends the job. Arming and
// disarming take an uncontended mutex (tens of nanoseconds); the thread starts at the first arm().
class Backstop {
 public:
  static constexpr double kCheckSeconds = 0.1;
  using Hook = std::function<void(BlockedSection&)>;

  explicit Backstop(Hook hook) : hook_(std::move(hook)) {}
  ~Backstop();
  Backstop(const Backstop&) = delete;
  Backstop& operator=(const Backstop&) = delete;

  // Enters a section (next_check starts at the watch's limit).
  void arm(const CommWatch& watch, const char* collective);
  // Leaves it: once this returns, the hook is not running and does not run until the next arm().
  void disarm();
  // False as soon as disarm() has begun: a hook in the middle of a census stops there.
  bool inside() const { return inside_.load(std::memory_order_acquire); }

 private:
  void run();
  Hook hook_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool armed_ = false;
  std::atomic<bool> inside_{false};
  AwakeClock clock_;  // since arm()
  BlockedSection section_;
};

}  // namespace ledgerlm
