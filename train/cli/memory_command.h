// `ledgerlm memory`: the planner. Predicts the memory ledger for a model that need not fit this
// machine, from a config file or from --params N (see memory_command.cpp for the flags).
#pragma once

#include <cstdint>
#include <string>

#include "train/cli/config_flags.h"
#include "train/ledger/memory_plan.h"

// CLI11 declared only, as in config_flags.h.
namespace CLI {
class App;
}  // namespace CLI

namespace ledgerlm {

struct MemoryCommand {
  ConfigBinding config;
  RunConfig run;
  // Short flags; each overrides the matching config key when given (the CLI11 option counts).
  double params = 0;  // --params N: a model of N parameters without a parameter table
  double layers = 0;  // --layers: also as 1e8
  int64_t hidden = 0, heads = 0, seq = 0, vocab = 0;
  std::string optim, offload, param_dtype, grad_dtype, master, recompute;
  int64_t world = 1, zero = 0, micro_batch = 0, accum = 0, threads = 0;
  bool json = false;
  bool tensors = false;  // --tensors: the placement table of one rank instead of the ledger
  int64_t rank = 0;      // --rank R: whose placement --tensors prints
  CLI::App* app = nullptr;
};

// Registers the `memory` subcommand and its flags on `app`.
CLI::App* memory_command_add(CLI::App& app, MemoryCommand* cmd);
// Builds the planner's input from the parsed command (config file, --section.key flags, then
// the short flags). Throws Error naming the flag for bad input.
PlanInput memory_command_input(MemoryCommand& cmd);
// The predicted ledger of the parsed command: memory_plan_for_config for a model from a config
// (bounded time and memory for any model.n_layer), the formulas over --params N otherwise.
MemoryPlan memory_command_plan(MemoryCommand& cmd);
int command_memory(MemoryCommand& cmd);

}  // namespace ledgerlm
