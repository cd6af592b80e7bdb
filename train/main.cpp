// The ledgerlm command line: subcommands prepare, train, eval, sample, bench.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "model/backend/cpu/cpu_backend.h"
#include "train/cli.h"

int main(int argc, char** argv) {
  // OpenBLAS picks its kernels when the library loads. On CPUs newer than it knows it falls back
  // to generic SSE3 kernels (several times slower); then restart once with the right core type.
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr) {
    std::string core = ledgerlm::cpu::cpu_blas_better_coretype();
    if (!core.empty()) {
      setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
      execv("/proc/self/exe", argv);  // returns only on failure: carry on with generic kernels
    }
  }
  return ledgerlm::cli_main(argc, argv);
}
