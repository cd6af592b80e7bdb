// Run directories (runs/NAME): creation, the resolved config.toml, and loading a run back for
// eval, sample and export.
#pragma once

#include <string>

#include "data/meta.h"
#include "train/run_config.h"

namespace ledgerlm {

// Fills model.vocab_size from the data's meta.json when 0, and refuses a mismatch.
DataMeta run_resolve_data(RunConfig* config);

// Creates OUT_DIR/NAME. An existing directory is refused unless `reuse` (resume, overwrite).
std::string run_dir_prepare(const RunConfig& config, bool reuse);

// Writes the resolved config to DIR/config.toml (atomically).
void run_write_config(const std::string& run_dir, const RunConfig& config);

// Reads DIR/config.toml back into a RunConfig; errors name the directory.
RunConfig run_load_config(const std::string& run_dir);

// Writes `text` to `path` via a temporary file, fsync and rename.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ledgerlm
