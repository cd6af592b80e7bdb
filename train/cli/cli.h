// Entry point of the ledgerlm command line (subcommands are registered in cli.cpp).
#pragma once

namespace ledgerlm {

class Comm;

// Runs one command line (argv[0] is the program). `train` connects the ranks of an mpirun job
// through `comm`, or through a Comm of its own when `comm` is null (created once per process:
// a caller running several command lines in one process passes its own).
int cli_main(int argc, char** argv, Comm* comm = nullptr);

}  // namespace ledgerlm
