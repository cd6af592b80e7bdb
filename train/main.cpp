// The ledgerlm command line: subcommands prepare, train, eval, sample, bench, config, memory,
// export.
#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "model/backends/cpu_facts.h"
#include "train/cli/cli.h"

int main(int argc, char** argv) {
  // Large temporaries (MPI's collective buffers, host staging of weights) come from their own
  // mappings and go back to the system when freed: glibc's default moves its mmap threshold up
  // to 32 MB after the first such free, after which they would stay in the heap, and the
  // resident memory would no longer show what is live. Fixing the threshold keeps RSS honest.
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Two runtime libraries read their settings from the environment when they load, before
  // main(); where a better setting exists and the user chose none, set it and restart once.
  // - libgomp's default spin-waiting collapses throughput when the cores are shared (measured
  //   7x slower under load), while sleeping at once costs a futex wake-up per parallel region
  //   (bench_tiny: 15.5k tok/s). Passive waiting after a short spin (GOMP_SPINCOUNT 1000) keeps
  //   most of the spinning speed alone (~19-20k tok/s) and loses ~10% when two runs share the
  //   cores (22-23k vs 25-26k tok/s together; spin 10000 lost half).
  // - OpenBLAS 0.3.21 falls back to generic SSE3 kernels on CPUs newer than it knows.
  bool restart = false;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    if (std::getenv("GOMP_SPINCOUNT") == nullptr) setenv("GOMP_SPINCOUNT", "1000", 1);
    restart = true;
  }
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    std::string core = ledgerlm::cpu_backend_blas_coretype();
    if (!core.empty()) {
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      restart = true;
    }
  }
  if (restart) execv("/proc/self/exe", argv);  // returns only on failure: carry on as we are
  return ledgerlm::cli_main(argc, argv);
}
