// The ledgerlm command line: subcommands prepare, train, eval, sample, bench, memory, export.
#include "train/cli.h"

int main(int argc, char** argv) { return ledgerlm::cli_main(argc, argv); }
