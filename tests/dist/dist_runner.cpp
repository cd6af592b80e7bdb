// Test driver for the data-parallel tests: runs several `ledgerlm train` command lines in one
// mpirun launch (MPI is initialised once), so a test can cover many configurations per launch.
// Usage: mpirun -np N ledgerlm_dist_runner FILE, where every line of FILE holds the flags of one
// `train` command (split at spaces; no quoting). Stops at the first command that fails.
#include <malloc.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train/cli/cli.h"
#include "train/comm/comm.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE (one line of train flags per run)\n", argv[0]);
    return 2;
  }
  mallopt(M_MMAP_THRESHOLD, 1 << 20);  // as the ledgerlm binary does (train/main.cpp)
  std::unique_ptr<ledgerlm::Comm> comm = ledgerlm::comm_create();
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "dist_runner: cannot read %s\n", argv[1]);
    return 2;
  }
  std::string line;
  int index = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> words = {argv[0], "train"};
    std::istringstream ss(line);
    for (std::string w; ss >> w;) words.push_back(w);
    std::vector<char*> args;
    for (std::string& w : words) args.push_back(w.data());
    const int rc = ledgerlm::cli_main(static_cast<int>(args.size()), args.data(), comm.get());
    if (rc != 0) {
      std::fprintf(stderr, "dist_runner: run %d failed (exit %d): %s\n", index, rc, line.c_str());
      return rc;
    }
    ++index;
  }
  return 0;
}
