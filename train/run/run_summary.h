// A run's summary: one record written when a run finishes or stops, as the last line of
// metrics.jsonl ({"summary": true, ...}) and as runs/NAME/summary.json, from the same JSON object
// (one source, so the two cannot disagree). Besides the loop's figures (steps, tokens, times,
// losses, memory) it names what the run produced: the SHA-256 of its resolved config.toml (two
// runs with the same hash were configured identically), its last checkpoint and that
// checkpoint's size on disk, and the weights file's size. `ledgerlm compare` reads summary.json.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace ledgerlm {

// SHA-256 (hex) of RUN_DIR/config.toml's bytes, as written.
std::string run_config_sha256(const std::string& run_dir);

// Adds config_sha256, ckpt (the latest checkpoint's directory name, null if none), ckpt_bytes
// (bytes of its files), weights_bytes (model.safetensors) to a summary record.
void run_summary_add_files(const std::string& run_dir, nlohmann::json* summary);

// Writes RUN_DIR/summary.json (atomically and checked, like every run file).
void run_summary_write(const std::string& run_dir, const nlohmann::json& summary);

// RUN_DIR/summary.json, or null when the run has none (still running, killed, or never
// finished a step); a file that is not a JSON object is an error naming it.
nlohmann::json run_summary_read(const std::string& run_dir);

// True when the run in RUN_DIR finished at `step`: its summary.json says "finished" at that step
// and its weights (model.safetensors) exist. A run killed after its final checkpoint but before
// those files were written (or one whose summary says it failed or stopped) is not finished:
// --resume auto completes it. An unreadable summary.json counts as none.
bool run_summary_finished_at(const std::string& run_dir, int64_t step);

// Removes RUN_DIR/summary.json (a new, overwritten or resumed run has not ended yet).
void run_summary_remove(const std::string& run_dir);

}  // namespace ledgerlm
