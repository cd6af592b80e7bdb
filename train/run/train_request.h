// What `ledgerlm train` asks of a run (run_setup.h), once the command line has resolved the
// config: the CLI fills it, the run room takes it, so that nothing below the CLI knows its flags.
#pragma once

#include <set>
#include <string>

#include "train/config/run_config.h"

namespace ledgerlm {

// What `ledgerlm train` asks for, once the command line has resolved the config.
struct TrainRequest {
  RunConfig run;
  std::string resume;     // "" | "auto" | checkpoint path
  std::string init_from;  // weights-only start
  // The config keys the config file or flags set; the others hold defaults, and --init-from a
  // run directory fills the architecture keys among them from that run.
  std::set<std::string> explicit_keys;
  std::string command_line;    // as typed (shell-quoted): recorded in the run's lock
  bool print_tensors = false;  // --tensors: print rank 0's per-tensor table before step 1
};

}  // namespace ledgerlm
