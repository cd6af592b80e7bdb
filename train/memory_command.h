// `ledgerlm memory`: the planner. Predicts the memory ledger for a model that need not fit this
// machine, from a config file or from --params N (see memory_command.cpp for the flags).
#pragma once

#include <CLI/CLI.hpp>

#include "train/config_keys.h"

namespace ledgerlm {

struct MemoryCommand {
  ConfigBinding config;
  RunConfig run;
};

// Registers the `memory` subcommand and its flags on `app`.
CLI::App* memory_command_add(CLI::App& app, MemoryCommand* cmd);
int command_memory(MemoryCommand& cmd);

}  // namespace ledgerlm
