// `ledgerlm export`: weights for other tools.
#include "model/base/check.h"
#include "train/commands.h"

namespace ledgerlm {

int command_export(const ExportCommand&) { fail("ledgerlm export: not available yet"); }

}  // namespace ledgerlm
