// The collective watchdog's policy (train/comm/comm_watch.h), without MPI:
//   - the timeout in effect is max(dist.timeout_s, 5 x the slowest measured phase); start-up is
//     not measured; a new run forgets the previous one's phases;
//   - the phase and the ranks are named in the job-ending lines;
//   - a waiting rank spins 100 us, then sleeps 1/16 of its wait, between 20 us and 1 ms;
//   - time the process spends stopped does not count toward a wait;
//   - the Backstop calls its hook while armed, and never after disarm() has returned.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "train/comm/comm_watch.h"

namespace ledgerlm {
namespace {

// Times here are differences of doubles around 10-1000 s: each carries ~1e-13 of rounding.
constexpr double kTol = 1e-9;

TEST(CommWatch, TimeoutIsTheKeyOrFiveTimesTheSlowestPhase) {
  CommWatch w;
  w.begin_run(3.0, 100.0);
  // A long start-up (loading, building) is not a step: the key alone applies.
  w.begin(CommPhase::kTraining, 1, 400.0);
  EXPECT_EQ(w.limit(), 3.0);
  EXPECT_EQ(w.limit_reason(), "dist.timeout_s = 3");
  w.begin(CommPhase::kTraining, 2, 400.5);  // step 1 took 0.5 s: 5 x 0.5 < 3
  EXPECT_EQ(w.limit(), 3.0);
  w.begin(CommPhase::kCheckpoint, 2, 401.7);  // step 2 took 1.2 s: 6 s
  EXPECT_NEAR(w.limit(), 6.0, kTol);
  w.begin(CommPhase::kTraining, 3, 403.7);  // the save took 2 s: 10 s
  EXPECT_NEAR(w.limit(), 10.0, kTol);
  EXPECT_EQ(w.limit_reason(),
            "5 x the slowest checkpoint save so far (2 s), above dist.timeout_s = 3");
  w.begin(CommPhase::kTraining, 4, 403.8);  // a fast step does not lower it
  EXPECT_NEAR(w.limit(), 10.0, kTol);
  w.begin(CommPhase::kFinish, 4, 500.0);  // step 4 "took" 96.2 s: it counts (floor 481 s)...
  EXPECT_NEAR(w.limit(), 481.0, kTol);
  w.begin(CommPhase::kFinish, 4, 900.0);  // ...the run's end does not
  EXPECT_NEAR(w.limit(), 481.0, kTol);
  w.begin_run(30.0, 1000.0);  // the next run (several per launch) starts afresh
  EXPECT_EQ(w.limit(), 30.0);
  EXPECT_EQ(w.where(), "start-up");
}

TEST(CommWatch, LinesNameThePhaseTheRanksAndTheRule) {
  CommWatch w;
  w.begin_run(3.0, 0.0);
  w.begin(CommPhase::kTraining, 12, 1.0);
  EXPECT_EQ(w.where(), "training step 12");
  EXPECT_EQ(w.missing_message({1}, "all-reduce"),
            "rank 1 did not take part in the all-reduce within 3 s (training step 12; "
            "dist.timeout_s = 3); ending the job");
  w.begin(CommPhase::kEvaluation, 12, 1.5);
  EXPECT_EQ(w.where(), "evaluation at step 12");
  EXPECT_EQ(w.missing_message({1, 2, 3}, "all-gather"),
            "ranks 1, 2 and 3 did not take part in the all-gather within 3 s (evaluation at "
            "step 12; dist.timeout_s = 3); ending the job");
  w.begin(CommPhase::kCheckpoint, 12, 2.0);
  EXPECT_EQ(w.where(), "checkpoint save at step 12");
  w.begin(CommPhase::kWeights, 12, 2.0);
  EXPECT_EQ(w.where(), "weights save at step 12");
  EXPECT_EQ(w.stuck_message("broadcast", {7, 7}),
            "every rank answered, but the broadcast did not complete within 3 s (weights save "
            "at step 12; dist.timeout_s = 3); ending the job");
  EXPECT_NE(
      w.stuck_message("broadcast", {7, 6})
          .find("the ranks are at different collectives: rank 0 at number 7, rank 1 at number 6"),
      std::string::npos);
  EXPECT_EQ(w.late_message(0, "barrier", 3.25),
            "rank 0 waited 3.25 s for every rank to reach the barrier (weights save at step 12; "
            "dist.timeout_s = 3); continuing");
  EXPECT_EQ(w.rule_text(),
            "collectives time out after max(dist.timeout_s = 3 s, 5 x the slowest step, "
            "evaluation or save so far)");
  EXPECT_EQ(comm_rank_list({4, 9}), "4 and 9");
}

TEST(PollBackoff, SpinsThenSleepsASixteenthOfTheWaitBetweenBounds) {
  EXPECT_EQ(PollBackoff::sleep_for(0.0), 0.0);
  EXPECT_EQ(PollBackoff::sleep_for(99e-6), 0.0);
  EXPECT_EQ(PollBackoff::sleep_for(100e-6), 20e-6);            // 1/16 would be 6 us: the floor
  EXPECT_NEAR(PollBackoff::sleep_for(1.6e-3), 100e-6, 1e-15);  // 1/16
  EXPECT_EQ(PollBackoff::sleep_for(16e-3), 1e-3);
  EXPECT_EQ(PollBackoff::sleep_for(600.0), 1e-3);  // the cap: a waiter wakes 1000 times a second
}

TEST(AwakeClock, AStepLongerThanAQuarterSecondCountsAsOne) {
  AwakeClock c(10.0);
  EXPECT_NEAR(c.tick(10.1), 0.1, kTol);
  EXPECT_NEAR(c.tick(10.3), 0.3, kTol);
  // Stopped for a minute (SIGSTOP, a suspended job): a quarter second of it counts.
  EXPECT_NEAR(c.tick(70.3), 0.55, kTol);
  EXPECT_NEAR(c.tick(70.4), 0.65, kTol);
}

TEST(Backstop, CallsItsHookWhileArmedAndNeverAfterDisarm) {
  std::atomic<int> calls{0};
  std::atomic<bool> inside_seen{true};
  Backstop* self = nullptr;
  Backstop b([&](BlockedSection& s) {
    EXPECT_STREQ(s.collective, "all-reduce");
    EXPECT_EQ(s.next_check, 3.0);  // starts at the watch's limit
    if (!self->inside()) inside_seen = false;
    ++calls;
  });
  self = &b;
  CommWatch w;
  w.begin_run(3.0);
  b.arm(w, "all-reduce");
  // The thread checks every 0.1 s: a call within 10 s even on a loaded machine.
  for (int i = 0; i < 1000 && calls.load() == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_GT(calls.load(), 0);
  b.disarm();
  EXPECT_FALSE(b.inside());
  const int after = calls.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(350));  // three checks
  EXPECT_EQ(calls.load(), after) << "the hook ran after disarm() returned";
  EXPECT_TRUE(inside_seen.load()) << "the hook ran while inside() was false";
}

}  // namespace
}  // namespace ledgerlm
