// The gate's persistent dissemination barrier (see comm_mpi_arrival.h).
#include "train/comm/comm_mpi_arrival.h"

#include "model/base/check.h"
#include "train/comm/comm_mpi_check.h"

namespace ledgerlm {

MpiArrival::MpiArrival(MPI_Comm comm) {
  int rank = 0, world = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &world);
  while ((1 << rounds_) < world) ++rounds_;
  in_.assign(static_cast<size_t>(rounds_), 0);
  send_.assign(static_cast<size_t>(rounds_), MPI_REQUEST_NULL);
  recv_.assign(static_cast<size_t>(rounds_), MPI_REQUEST_NULL);
  for (int k = 0; k < rounds_; ++k) {
    const int to = (rank + (1 << k)) % world, from = (rank - (1 << k) % world + world) % world;
    const size_t i = static_cast<size_t>(k);
    mpi_check(MPI_Send_init(&out_, 1, MPI_UINT64_T, to, k, comm, &send_[i]), "gate send");
    mpi_check(MPI_Recv_init(&in_[i], 1, MPI_UINT64_T, from, k, comm, &recv_[i]), "gate receive");
  }
}

MpiArrival::~MpiArrival() {
  for (MPI_Request& r : send_) MPI_Request_free(&r);
  for (MPI_Request& r : recv_) MPI_Request_free(&r);
}

void MpiArrival::start(uint64_t seq) {
  seq_ = seq;
  out_ = seq;
  round_ = 0;
  if (rounds_ > 0) start_round();
}

void MpiArrival::start_round() {
  const size_t i = static_cast<size_t>(round_);
  mpi_check(MPI_Start(&recv_[i]), "gate receive");
  mpi_check(MPI_Start(&send_[i]), "gate send");
}

bool MpiArrival::test() {
  while (round_ < rounds_) {
    const size_t i = static_cast<size_t>(round_);
    int received = 0, sent = 0;
    mpi_check(MPI_Test(&recv_[i], &received, MPI_STATUS_IGNORE), "gate receive");
    mpi_check(MPI_Test(&send_[i], &sent, MPI_STATUS_IGNORE), "gate send");
    if (!received || !sent) return false;
    LLM_ASSERT(in_[i] == seq_, "the ranks are at different collectives: this rank at number ", seq_,
               ", a rank it heard from at number ", in_[i]);
    if (++round_ < rounds_) start_round();
  }
  return true;
}

}  // namespace ledgerlm
