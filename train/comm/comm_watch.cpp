// The collective watchdog's policy, backoff and backstop (see comm_watch.h).
#include "train/comm/comm_watch.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>

#include "model/base/check.h"
#include "model/base/subnormals.h"

namespace ledgerlm {
namespace {

// The phases whose durations set the floor: start-up (loading, building) and the run's end are
// not steps, and a long start-up must not stretch the timeout of every step after it.
bool measured(CommPhase phase) {
  return phase == CommPhase::kTraining || phase == CommPhase::kEvaluation ||
         phase == CommPhase::kWeights || phase == CommPhase::kCheckpoint;
}

const char* phase_noun(CommPhase phase) {
  switch (phase) {
    case CommPhase::kTraining:
      return "step";
    case CommPhase::kEvaluation:
      return "evaluation";
    case CommPhase::kWeights:
      return "weights save";
    case CommPhase::kCheckpoint:
      return "checkpoint save";
    default:
      return "phase";
  }
}

// Seconds as a person writes them: "3", "61.5", "600", "0.25".
std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, s >= 100 ? "%.0f" : "%.3g", s);
  return buf;
}

}  // namespace

double comm_now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double AwakeClock::tick(double now) {
  elapsed_ += std::min(now - last_, kMaxStep);
  last_ = now;
  return elapsed_;
}

void CommWatch::begin_run(double timeout_s, double now) {
  timeout_s_ = timeout_s;
  slowest_s_ = 0.0;
  slowest_phase_ = CommPhase::kTraining;
  phase_ = CommPhase::kStartup;
  step_ = 0;
  phase_start_ = now;
}

void CommWatch::begin(CommPhase phase, int64_t step, double now) {
  if (measured(phase_) && now - phase_start_ > slowest_s_) {
    slowest_s_ = now - phase_start_;
    slowest_phase_ = phase_;
  }
  phase_ = phase;
  step_ = step;
  phase_start_ = now;
}

double CommWatch::limit() const {
  return std::max(timeout_s_, kFloorFactor * slowest_s_);
}

std::string CommWatch::where() const {
  const std::string at = std::to_string(step_);
  switch (phase_) {
    case CommPhase::kStartup:
      return "start-up";
    case CommPhase::kTraining:
      return "training step " + at;
    case CommPhase::kEvaluation:
      return "evaluation at step " + at;
    case CommPhase::kWeights:
      return "weights save at step " + at;
    case CommPhase::kCheckpoint:
      return "checkpoint save at step " + at;
    case CommPhase::kFinish:
      return "the run's summary after step " + at;
  }
  return "?";
}

std::string CommWatch::limit_reason() const {
  const std::string key = "dist.timeout_s = " + seconds_text(timeout_s_);
  if (kFloorFactor * slowest_s_ <= timeout_s_) return key;
  return error_message(seconds_text(kFloorFactor), " x the slowest ", phase_noun(slowest_phase_),
                       " so far (", seconds_text(slowest_s_), " s), above ", key);
}

std::string CommWatch::rule_text() const {
  return error_message("collectives time out after max(dist.timeout_s = ", seconds_text(timeout_s_),
                       " s, ", seconds_text(kFloorFactor),
                       " x the slowest step, evaluation or save so far)");
}

std::string CommWatch::missing_message(const std::vector<int>& ranks,
                                       const char* collective) const {
  return error_message(ranks.size() == 1 ? "rank " : "ranks ", comm_rank_list(ranks),
                       " did not take part in the ", collective, " within ", seconds_text(limit()),
                       " s (", where(), "; ", limit_reason(), "); ending the job");
}

std::string CommWatch::stuck_message(const char* collective,
                                     const std::vector<uint64_t>& positions) const {
  std::string at;
  if (std::adjacent_find(positions.begin(), positions.end(), std::not_equal_to<>()) !=
      positions.end()) {
    for (size_t r = 0; r < positions.size(); ++r)
      at += error_message(r ? ", rank " : "; the ranks are at different collectives: rank ", r,
                          " at number ", positions[r]);
  }
  return error_message("every rank answered, but the ", collective, " did not complete within ",
                       seconds_text(limit()), " s (", where(), "; ", limit_reason(), at,
                       "); ending the job");
}

std::string CommWatch::unattributed_message(int rank, const char* transport,
                                            const char* collective) const {
  return error_message("rank ", rank, ": the ", transport, " ", collective,
                       " did not complete within ", seconds_text(limit()), " s (", where(), "; ",
                       limit_reason(), "); ", transport,
                       " does not say which rank is missing or stalled; ending the job");
}

std::string CommWatch::late_message(int rank, const char* collective, double waited_s) const {
  return error_message("rank ", rank, " waited ", seconds_text(waited_s),
                       " s for every rank to reach the ", collective, " (", where(), "; ",
                       limit_reason(), "); continuing");
}

std::string comm_rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += i + 1 == ranks.size() ? " and " : ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

double PollBackoff::sleep_for(double waited_s) {
  if (waited_s < kSpinSeconds) return 0.0;
  return std::clamp(waited_s / kFraction, kMinSleep, kMaxSleep);
}

void PollBackoff::pause(double waited_s) {
  const double s = sleep_for(waited_s);
  if (s > 0.0) sleep(s);
}

void PollBackoff::sleep(double s) {
  // Linux lets a sleep of a normal thread end up to its timer slack (50 us) late: as much as a
  // short wait itself. The first sleep of a thread lowers its slack to 1 us, for good (that
  // only makes the thread's other timed sleeps end closer to when they were asked to).
  thread_local const bool precise = ::prctl(PR_SET_TIMERSLACK, 1000UL) == 0;
  (void)precise;
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

Backstop::~Backstop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Backstop::arm(const CommWatch& watch, const char* collective) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!thread_.joinable()) thread_ = std::thread(&Backstop::run, this);
  section_ = BlockedSection{watch, collective, 0.0, watch.limit(), 0};
  clock_ = AwakeClock();
  armed_ = true;
  inside_.store(true, std::memory_order_release);
}

void Backstop::disarm() {
  inside_.store(false, std::memory_order_release);
  std::lock_guard<std::mutex> lock(mu_);
  armed_ = false;
}

void Backstop::run() {
  // Signals are for the main thread (the stop handlers run there, on their own stack).
  sigset_t all;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::duration<double>(kCheckSeconds));
    if (stop_ || !armed_) continue;
    // This thread starts before the run's config is read: it takes precision.subnormals' mode
    // (subnormals.h) when it wakes to work, not only when it starts.
    subnormals_adopt();
    section_.awake = clock_.tick();
    hook_(section_);
  }
}

}  // namespace ledgerlm
