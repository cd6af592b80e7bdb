// A study as a file: a base config plus axes of config keys, expanded into a manifest of runs
// (`ledgerlm study plan`). Each run has a deterministic, filesystem-safe name made from its axis
// values and the full set of key overrides it trains with; planning the same file again gives the
// same manifest, and re-planning an extended file keeps the runs already planned. An LR axis may be
// a sweep (factor 2 around a centre) that `study run` widens at an edge (study_sweep_edge).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ledgerlm {

// Expands STUDY_PATH into a manifest. `previous` is the manifest already in the study directory
// (null when none): its runs stay, in their order, new ones follow, and its sweeps' extensions
// ("low"/"high" points added by `study run`) are kept. A run of the same name whose overrides
// changed is an error naming it (its results would no longer match its settings).
nlohmann::json study_plan(const std::string& study_path, const nlohmann::json& previous);

// Where a sweep's best point lies: -1 at the lowest LR, +1 at the highest, 0 inside (or fewer
// than 3 points, where no edge means anything). `loss_by_exponent` maps each point's exponent
// (LR = centre x 2^exponent) to its loss; non-finite losses (a run that diverged) never win.
int study_sweep_edge(const std::map<int, double>& loss_by_exponent);

// The part of a run name an axis value makes ("lr0.003", "seed1", "adamw", "b2x4x1"): the key's
// last component, or the whole key (dots as dashes) when another of ALL_KEYS ends alike.
std::string study_name_part(const std::string& key, const std::string& value,
                            const std::vector<std::string>& all_keys);
// A value's text as a run name writes it: a number's positive exponent without its '+' (no
// run-name character; it used to become '-', naming 1e+06 as 1e-06) and without leading zeros
// ("1e+06" -> "1e6", "1.5e+20" -> "1.5e20"). Everything else, negative exponents included
// ("1e-06"), is the text itself, so the names of earlier manifests stay as they were.
std::string study_number_name(const std::string& text);
// NAME with every character a file name should not hold replaced by '-'.
std::string study_filesystem_safe(std::string name);

// Refuses, in one line starting with WHERE, a run that `ledgerlm train` would refuse: the base
// config file (empty: none) with OVERRIDES applied, every section validated.
void study_validate_run(const std::string& config_file,
                        const std::map<std::string, std::string>& overrides,
                        const std::string& where);

// RUN launched on RANKS ranks at the same global batch (`study run --ranks-per-run`): "world"
// RANKS and the micro-batch (from the run's overrides or MANIFEST's config file) scaled by
// world / RANKS, the accumulation kept. RANKS <= 0 or equal to the run's world: RUN unchanged. An
// error naming the run when RANKS does not divide its sequences per micro-batch step. The result
// agrees with the planned run to rounding, not bit for bit (the gradients' summation order
// follows the split).
nlohmann::json study_spread_ranks(const nlohmann::json& manifest, const nlohmann::json& run,
                                  int64_t ranks);

// Refuses, in one line starting with WHERE, a run name that is no single file name inside
// runs/: empty, holding '..' or a path separator or a control character, or starting with '-'.
void study_check_run_name(const std::string& name, const std::string& where);

// Reads DIR/manifest.json (an error naming it when missing or not a study manifest, or when a
// run's name fails study_check_run_name or appears twice).
nlohmann::json study_manifest_read(const std::string& dir);
// Writes DIR/manifest.json atomically.
void study_manifest_write(const std::string& dir, const nlohmann::json& manifest);

}  // namespace ledgerlm
