// The arrival barrier of the MPI gate (comm_mpi_gate.h): a non-blocking dissemination barrier
// (ceil(log2 N) rounds; in round k each rank sends to rank + 2^k and hears from rank - 2^k) on
// persistent point-to-point requests made once, rather than MPI_Ibarrier, which builds a new
// schedule at every call (both measured at a few microseconds per gate between two training
// computations). Each message carries the gate's number: a rank whose collectives fell out of
// step with the others' (a bug: every rank must call the same collectives in the same order)
// fails with that error instead of pairing the wrong collectives.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace ledgerlm {

class MpiArrival {
 public:
  // `comm`: a communicator of the gate's own (no other traffic may match its messages).
  explicit MpiArrival(MPI_Comm comm);
  ~MpiArrival();
  MpiArrival(const MpiArrival&) = delete;
  MpiArrival& operator=(const MpiArrival&) = delete;

  // Begins the barrier of gate number `seq` (the previous one must have completed).
  void start(uint64_t seq);
  // Advances it as far as the messages that arrived allow; true once every rank has started it.
  bool test();

 private:
  void start_round();
  int rounds_ = 0, round_ = 0;
  uint64_t seq_ = 0;
  uint64_t out_ = 0;          // the number sent in every round
  std::vector<uint64_t> in_;  // per round: the number received
  std::vector<MPI_Request> send_, recv_;
};

}  // namespace ledgerlm
