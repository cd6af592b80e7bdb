#include "train/run/build_info.h"

namespace ledgerlm {

std::string build_version_text() {
  std::string text = std::string("ledgerlm ") + build_version() + " (commit " + build_commit();
  const int dirty = build_dirty();
  if (std::string(build_commit()) == "unknown")
    text += ": built outside a git checkout";
  else if (dirty == 1)
    text += ", with uncommitted changes";
  else if (dirty == 0)
    text += ", clean";
  else
    text += ", changes unknown";
  return text + ")";
}

nlohmann::json build_info_json() {
  const int dirty = build_dirty();
  return {{"version", build_version()},
          {"commit", build_commit()},
          {"dirty", dirty < 0 ? nlohmann::json() : nlohmann::json(dirty == 1)}};
}

}  // namespace ledgerlm
