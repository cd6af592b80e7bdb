// Names of the unit phases (see unit_access.h), for logs and test messages.
#include "model/unit_access.h"

namespace ledgerlm {

const char* unit_phase_name(UnitPhase phase) {
  switch (phase) {
    case UnitPhase::kForward:
      return "forward";
    case UnitPhase::kBackward:
      return "backward";
    case UnitPhase::kRecompute:
      return "recompute";
  }
  return "?";
}

}  // namespace ledgerlm
