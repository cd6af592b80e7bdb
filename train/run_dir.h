// Run directories (runs/NAME): creation, the resolved config.toml, and loading a run back for
// eval, sample and export.
#pragma once

#include <cstdint>
#include <map>
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

// Every config key as "section.key" -> its value as text (the form saved in checkpoints).
std::map<std::string, std::string> run_config_flat(const RunConfig& config);

// A resumed run continues DIR/metrics.jsonl: records of steps after `step` (written by the
// previous process after its last checkpoint) are dropped, atomically, so the log reads as one
// run. Lines that are not JSON objects are kept as they are.
void run_metrics_truncate(const std::string& run_dir, int64_t step);

// Writes `text` to `path` via a temporary file, fsync and rename.
void write_file_atomic(const std::string& path, const std::string& text);

}  // namespace ledgerlm
