// The finals of a study: once every sweep run of an arm has finished, the arm's best setting
// (the lowest median final loss over its sweep seeds, study_seed_median) is trained again with the
// study's fresh seeds
// ([finals] seeds: the same seeds in every arm, so arms can be compared pair by pair), and,
// with [finals.wall_clock], for a number of seconds instead of the token budget. An arm is the
// runs that share the values of the [finals] select axes (by default the optimizer); a setting is
// one combination of the other axes (LR, weight decay, ...) over the seeds. With the study's
// objective = "steps_to_target" the best setting is the one with the fewest median steps to target.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ledgerlm {

// What a run's loss is known to be: nullopt while it has not finished (or is not yet evaluated),
// +infinity when it failed (diverged), else its final loss.
using StudyLossOf = std::function<std::optional<double>(const std::string& run_name)>;

// Adds the final runs of every arm whose sweep runs are all known and that has none yet, and
// records the choice in manifest["finals"]["arms"]. Returns true when runs were added. A study
// without [finals] is left as it is.
bool study_plan_finals(nlohmann::json* manifest, const StudyLossOf& loss_of);

// Whether a manifest entry is a final run that trains for a number of seconds.
bool study_is_wall_clock(const nlohmann::json& run);

}  // namespace ledgerlm
