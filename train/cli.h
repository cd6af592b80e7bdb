// Entry point of the ledgerlm command line (subcommands are registered in cli.cpp).
#pragma once

namespace ledgerlm {
int cli_main(int argc, char** argv);
}
