// Micro-benchmark (not a test): what the timeout gate (train/comm/comm_mpi_gate.h) adds to one
// collective, under mpirun with 2 ranks. Each round times a batch of bare MPI_Allreduce calls
// (one double) and a batch of Comm::all_reduce_sum calls (gate, then the same MPI_Allreduce),
// alternately, and prints the medians over the rounds:
//   - balanced: both ranks call at once: the gate's own latency (a non-blocking barrier);
//   - skewed by D us: rank 1 computes D us before each call, so rank 0 waits D us in each
//     (spinning inside MPI bare, sleeping in the gate): the figure is rank 1's time per call
//     beyond D, i.e. how late the waiting rank joins once the other arrives, and rank 0's CPU
//     use while it waits.
// Build (after building ledgerlm in build/):
//   mpicxx -O2 -std=c++20 -fopenmp -I. tests/bench/bench_comm_gate.cpp build/libledgerlm_comm.a \
//     build/libledgerlm_model.a -o /tmp/bench_comm_gate
// Run: mpirun --allow-run-as-root -np 2 -x OMP_NUM_THREADS=1 /tmp/bench_comm_gate [ROUNDS]
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "train/comm/comm.h"

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double cpu_seconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

void compute_for(double seconds) {  // a rank's work before a collective
  const double until = now() + seconds;
  while (now() < until) {
  }
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::unique_ptr<ledgerlm::Comm> comm = ledgerlm::comm_create();
  const int rank = comm->rank();
  if (comm->world() != 2) {
    std::fprintf(stderr, "bench_comm_gate: run it under mpirun -np 2\n");
    return 2;
  }
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 21;
  if (rank == 0)
    std::printf(
        "| rank 1 computes before each call | bare MPI us/call | gate us/call | gate - bare "
        "| rank 0 CPU while waiting: bare | gate |\n|---|---|---|---|---|---|\n");
  for (double skew : {0.0, 20e-6, 100e-6, 500e-6, 2000e-6}) {
    const int calls = skew >= 500e-6 ? 200 : 2000;
    std::vector<double> bare, gated, cpu_bare, cpu_gated;
    for (int round = 0; round < rounds; ++round) {
      for (int variant = 0; variant < 2; ++variant) {
        double value = 1.0;
        comm->barrier();
        const double t0 = now(), c0 = cpu_seconds();
        for (int i = 0; i < calls; ++i) {
          if (rank == 1) compute_for(skew);
          if (variant == 0)
            MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
          else
            comm->all_reduce_sum(&value, 1);
        }
        const double per_call = (now() - t0) / calls - (rank == 1 ? skew : 0.0);
        const double cpu_share = (cpu_seconds() - c0) / (now() - t0);
        (variant == 0 ? bare : gated).push_back(per_call * 1e6);
        (variant == 0 ? cpu_bare : cpu_gated).push_back(cpu_share * 100.0);
      }
    }
    // Rank 1 times the calls (it arrives last); rank 0 reports its own CPU share.
    double r1[2] = {median(bare), median(gated)};
    MPI_Bcast(r1, 2, MPI_DOUBLE, 1, MPI_COMM_WORLD);
    if (rank == 0)
      std::printf("| %.0f us | %.2f | %.2f | %+.2f | %.0f%% | %.0f%% |\n", skew * 1e6, r1[0], r1[1],
                  r1[1] - r1[0], median(cpu_bare), median(cpu_gated));
  }
  return 0;
}
