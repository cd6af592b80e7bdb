// Small files written whole and atomically (config.toml, summary.json, ledger.json, export
// configs): the text goes to PATH.tmp, is fsynced and renamed over PATH, and the directory is
// fsynced, so a reader sees the old file or the new one, never a part.
#pragma once

#include <string>

namespace ledgerlm {

// Writes `text` to `path` via PATH.tmp, fsync and rename, and fsyncs the directory. Every step is
// checked: a failure (a full disk) removes PATH.tmp, leaves PATH as it was and throws one Error
// naming PATH. Callers choose who writes (rank 0 for run-level files).
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ledgerlm
