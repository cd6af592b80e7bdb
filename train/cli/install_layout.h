// Where the files ledgerlm runs or points users to (the study report's Python programs, the
// configs) are found, relative to the binary itself, so that the same lookup works in a build
// tree and in an installed copy:
//   installed (cmake --install, the Debian package): PREFIX/bin/ledgerlm, PREFIX/share/ledgerlm/REL
//   a build directory inside the checkout:           CHECKOUT/build/ledgerlm, CHECKOUT/REL
#pragma once

#include <string>
#include <vector>

namespace ledgerlm {

// This binary's path. When it was replaced on disk while it ran (a rebuild, an upgrade) the link
// names the old file with " (deleted)": the new file at that path is returned. "ledgerlm" when
// /proc/self/exe cannot be read.
std::string self_exe();

// The places `rel` (e.g. "scripts/study_report.py") is looked for, in order.
std::vector<std::string> install_candidates(const std::string& rel);

// The first of install_candidates(rel) that exists, or "".
std::string install_find(const std::string& rel);

}  // namespace ledgerlm
