// `ledgerlm memory`: the planner (see memory_command.h).
#include "train/memory_command.h"

#include "model/base/check.h"

namespace ledgerlm {

CLI::App* memory_command_add(CLI::App& app, MemoryCommand* cmd) {
  CLI::App* sub = app.add_subcommand("memory", "predict the memory ledger of a configuration");
  config_register_flags(sub, &cmd->config, &cmd->run);
  return sub;
}

int command_memory(MemoryCommand&) { fail("ledgerlm memory: the planner is not available yet"); }

}  // namespace ledgerlm
