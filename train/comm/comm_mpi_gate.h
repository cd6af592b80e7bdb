// The MPI side of the collective watchdog (comm_watch.h). Before each collective every rank
// passes a gate, a non-blocking barrier (comm_mpi_arrival.h) on a duplicate of the job's
// communicator polled under PollBackoff, so that a rank waiting for the others sleeps instead of
// spinning and can give up. The collective itself then runs unchanged (the same blocking MPI call,
// hence the same reduction algorithm and the same bits as without the gate), among ranks that have
// all arrived, while the Backstop's thread watches it (MPI_THREAD_MULTIPLE: that thread calls MPI
// too).
//
// A rank waiting at a gate, or blocked in a collective for a while, answers "census" questions
// on the duplicate communicator (which can never match the job's own traffic) with the number of
// the collective it is at. A rank whose wait exceeds the watch's limit asks every other rank and
// waits up to kCensusGrace for the answers. A rank that does not answer is at no collective:
// stopped, dead, or stuck in computation or I/O (a SIGSTOP stops every thread of a process). The
// line naming those ranks ends the job; it is reported by the lowest rank that answered (the
// others hand it the line), so that the job says it once. A rank that arrives during the census
// ends the wait, with a warning. If every rank answers twice running and the collective still
// does not complete, the job ends too, with the ranks' positions.
//
// The same channel carries a rank's own failure to rank 0 (Comm::hand_failure_to_lead): rank 0
// throws it from its next gate, records the failed run and ends the job.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "train/comm/comm_mpi_arrival.h"
#include "train/comm/comm_watch.h"

namespace ledgerlm {

class MpiGate {
 public:
  // How long the rank that counts waits for the answers; a waiting rank polls every millisecond
  // and a blocked one every Backstop::kCheckSeconds, so a live rank answers well within it.
  static constexpr double kCensusGrace = 1.0;
  // How long a rank that handed its line to the reporting rank waits for that rank to end the
  // job before reporting the line itself.
  static constexpr double kRelayWait = 10.0;

  MpiGate(MPI_Comm world, const CommWatch& watch);
  ~MpiGate();
  MpiGate(const MpiGate&) = delete;
  MpiGate& operator=(const MpiGate&) = delete;

  // Main thread: returns once every rank has reached this collective ("all-reduce", ...); throws
  // JobError naming the ranks that did not within the watch's limit, or a line that another
  // rank handed to this one.
  void arrive(const char* collective);
  // The Backstop's hook (its thread) while the main thread is blocked in the collective after
  // arrive(): answers questions; past the limit, counts. Returns the line to end the job with,
  // or "" to go on. `backstop` tells it when the main thread has left the collective.
  std::string blocked(BlockedSection& section, const Backstop& backstop);
  // Main thread: see Comm::hand_failure_to_lead.
  void hand_failure_to_lead(const std::string& line);

 private:
  enum Tag { kAsk = 1, kReply = 2, kVerdict = 3, kFailed = 4 };
  static constexpr uint64_t kNoReply = ~uint64_t{0};
  enum class Census { kWaitOver, kAllAnswered, kVerdict };
  struct Verdict {
    std::string line;
    int reporter = 0;
  };

  // Answers census questions (if `answer`; a failing rank is at no collective), takes replies,
  // completes finished sends; returns the line of a verdict or failure sent to this rank, or "".
  std::string serve(bool answer);
  void send(int to, int tag, const std::string& bytes);
  // Asks every rank where it is. kWaitOver: `over()` turned true meanwhile; kAllAnswered: no rank
  // is silent; kVerdict: `v` names the silent ranks (or holds a line sent to this rank).
  Census census(const std::function<bool()>& over, const CommWatch& watch, const char* collective,
                Verdict* v);
  // The wait after a census that found every rank twice: ended with the ranks' positions.
  Verdict stuck(const CommWatch& watch, const char* collective) const;
  // Hands `v` to its reporter unless that is this rank; returns the line this rank ends with.
  std::string relay(const Verdict& v);

  MPI_Comm comm_ = MPI_COMM_NULL;       // a duplicate for census traffic
  MPI_Comm gate_comm_ = MPI_COMM_NULL;  // another for the arrival barrier (its own tags)
  std::unique_ptr<MpiArrival> arrival_;
  const CommWatch& watch_;
  int rank_ = 0, world_ = 1;
  // The main thread and the Backstop's hook never use these at the same time: the hook runs
  // only between Backstop::arm() and disarm(), under the Backstop's lock, while the main thread
  // is inside the blocking call.
  uint64_t seq_ = 0;               // collectives this rank has reached, counting the current one
  uint64_t epoch_ = 0;             // this rank's censuses (a reply names the census it answers)
  std::vector<uint64_t> replies_;  // the current census: each rank's seq_, or kNoReply
  struct PendingSend {
    MPI_Request request;
    std::string bytes;
  };
  std::list<PendingSend> pending_;  // a list: the buffers must not move until sent
};

}  // namespace ledgerlm
