// A test hook for the collective watchdog's tests (tests/dist/test_dist_watchdog.cpp): a rank
// that stops itself as the job enters a phase, as a rank hung on a filesystem or stopped by a
// user looks to the others. Unset (every real run), it costs one getenv per phase entered.
#pragma once

namespace ledgerlm {

// LEDGERLM_TEST_STOP_IN="RANK:PHASE", PHASE one of config (reading the config file), startup
// (reading the data), evaluation, weights, checkpoint:
// rank RANK raises SIGSTOP the first time it enters that phase (its every thread stops; only
// SIGKILL or SIGCONT can end or resume it). Callers pass the phase they begin, under these names.
void test_stop_in(int rank, const char* phase);

}  // namespace ledgerlm
