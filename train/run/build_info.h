// Which build of ledgerlm is running: its version, the git commit it was built from and whether
// the tracked files differed from that commit. Generated at build time (cmake/build_info.cmake)
// so that every run records what trained it, and a report can refuse to publish runs from an
// uncommitted or mixed build.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace ledgerlm {

// Defined in the generated build_info.cpp.
const char* build_commit();   // 40 hex digits, or "unknown" (built outside a git checkout)
int build_dirty();            // 1: uncommitted changes to tracked files; 0: none; -1: unknown
const char* build_version();  // the project's version (CMakeLists.txt)

// "ledgerlm 0.1.0 (commit 0123...cdef, clean)" | "(commit ..., with uncommitted changes)" |
// "(commit unknown: built outside a git checkout)".
std::string build_version_text();

// {"version": "0.1.0", "commit": "..." , "dirty": true | false | null}: null when unknown.
nlohmann::json build_info_json();

}  // namespace ledgerlm
