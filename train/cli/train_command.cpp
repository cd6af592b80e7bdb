// `ledgerlm train`: the run setup (run_setup.h), then the loop (train_loop.h) around the one
// training step (train_step.h).
#include "train/cli/commands.h"
#include "train/run/run_setup.h"
#include "train/run/train_loop.h"

namespace ledgerlm {

int command_train(TrainCommand& cmd, Comm& comm) {
  TrainRun run = run_setup(cmd.request, comm);
  return train_loop(run);
}

}  // namespace ledgerlm
