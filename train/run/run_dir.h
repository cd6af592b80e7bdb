// Run directories (runs/NAME): creation, the resolved config.toml, checked atomic writes, the
// metrics log on resume, and loading a run's config back for eval, sample and export.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "data/meta.h"
#include "model/base/atomic_file.h"
#include "train/config/run_config.h"

namespace ledgerlm {

// Checks the data directory as a whole (data_check.h: meta.json, tokenizer, shard headers) and
// resolves model.vocab_size and data.tokenizer_id from it when unset; refuses a mismatch.
DataMeta run_resolve_data(RunConfig* config);

// OUT_DIR/NAME of a config.
std::string run_dir_path(const RunConfig& config);
// Whether the run directory exists; refuses one that does unless `reuse` (resume, overwrite).
bool run_dir_check_reuse(const RunConfig& config, bool reuse);
// Creates the run directory (and OUT_DIR); refuses if it appeared since run_dir_check_reuse.
void run_dir_create(const std::string& run_dir);

// Writes the resolved config to DIR/config.toml (atomically); its first line says which command
// wrote it.
void run_write_config(const std::string& run_dir, const RunConfig& config,
                      const std::string& written_by = "ledgerlm train");

// Reads DIR/config.toml back into a RunConfig; errors name the directory.
RunConfig run_load_config(const std::string& run_dir);

// Every config key as "section.key" -> its value as text (the form saved in checkpoints).
std::map<std::string, std::string> run_config_flat(const RunConfig& config);

// A resumed run continues DIR/metrics.jsonl: records of steps after `step` (written by the
// previous process after its last checkpoint), the previous job's summary (a log ends with one
// summary, the last job's) and lines that are not JSON objects (a record cut by a kill or a full
// disk) are dropped, atomically, so the log reads as one clean run. Returns the number of
// unparseable lines dropped.
int64_t run_metrics_truncate(const std::string& run_dir, int64_t step);

// The records of metrics.jsonl at `step` merged into one object (later keys win; summaries and
// unreadable lines skipped); an empty object when there are none or no log. A job that completes
// a run without training a step reads the run's final figures (loss, val bpb) from it.
nlohmann::json run_metrics_at_step(const std::string& run_dir, int64_t step);

// `text` as one shell word: unchanged when it holds only [A-Za-z0-9_./:=@%+,-], else in single
// quotes. Commands ledgerlm prints for the user to run (resume hints) quote their paths with it.
std::string shell_quote(const std::string& text);

}  // namespace ledgerlm
