// The finals of a study (see study_finals.h).
#include "train/cli/study_finals.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "optim/optim_traits.h"
#include "train/cli/study_objective.h"
#include "train/cli/study_plan.h"

namespace ledgerlm {
using json = nlohmann::json;

namespace {

constexpr const char* kSeedAxis = "train.seed";

// The axis keys of a run, in its manifest order.
std::vector<std::string> axis_keys(const json& run) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : run["axes"].items()) keys.push_back(k);
  return keys;
}

// The value of KEY for a run: its axis value, else the override it trains with ("" if neither).
std::string value_of(const json& run, const std::string& key) {
  if (run["axes"].contains(key)) return run["axes"][key];
  if (run["overrides"].contains(key)) return run["overrides"][key];
  return "";
}

// A setting: the run's name without the seed's part (the seed's part comes last).
std::string setting_of(const json& run) {
  const std::string name = run["name"];
  if (!run["axes"].contains(kSeedAxis)) return name;
  const std::string part =
      study_filesystem_safe(study_name_part(kSeedAxis, run["axes"][kSeedAxis], axis_keys(run)));
  if (name == part) return "run";
  if (name.size() > part.size() + 1 &&
      name.compare(name.size() - part.size(), part.size(), part) == 0)
    return name.substr(0, name.size() - part.size() - 1);
  return name;
}

std::string seconds_text(double seconds) {
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, seconds);
  return std::string(buf, res.ptr);
}

// A wall-clock run has no length in steps; an optimizer key may default to the run's length
// (OptimTraits::run_length_key: AdEMAMix warms its slow EMA over the run by default,
// optim.ademamix_warmup = 0), so the wall-clock copy keeps the value the chosen token-budget
// setting had: its steps, from the budget and the batch in its overrides.
void pin_run_length(const json& chosen, json* run) {
  const json& ov = chosen["overrides"];
  const OptimTraits* optim = optim_traits_find(ov.value("optim.name", std::string()));
  if (optim == nullptr || optim->run_length_key.empty()) return;
  const std::string length_key = "optim." + optim->run_length_key;
  if (ov.contains(length_key) && ov[length_key] != "0") return;
  auto number = [&](const char* key, int64_t fallback) {
    return ov.contains(key) ? std::stoll(ov[key].get<std::string>()) : fallback;
  };
  int64_t steps = number("train.max_steps", 0);
  const int64_t per_step = chosen.value("world", int64_t{1}) * number("train.micro_batch", 0) *
                           number("train.accum", 1) * number("train.seq_len", 0);
  if (steps == 0 && per_step > 0) steps = (number("train.max_tokens", 0) + per_step - 1) / per_step;
  if (steps > 0) (*run)["overrides"][length_key] = std::to_string(steps);
}

struct Arm {
  json axes = json::object();                               // select key -> value
  std::map<std::string, std::vector<std::string>> runs_of;  // setting -> its runs
  std::map<std::string, json> first_run;                    // setting -> one of its runs
};

}  // namespace

bool study_is_wall_clock(const json& run) {
  return run.value("wall_clock", false);
}

bool study_plan_finals(json* manifest, const StudyLossOf& loss_of) {
  if (!manifest->contains("finals")) return false;
  json& finals = (*manifest)["finals"];
  std::vector<std::string> select;
  for (const json& k : finals["select"]) select.push_back(k);

  // The sweep runs by arm and setting.
  std::map<std::string, Arm> arms;
  for (const json& run : (*manifest)["runs"]) {
    if (run.contains("phase")) continue;  // a final run
    const std::vector<std::string> keys = axis_keys(run);
    std::string arm;
    json axes = json::object();
    for (const std::string& key : select) {
      const std::string value = value_of(run, key);
      axes[key] = value;
      if (!arm.empty()) arm.push_back('_');
      arm.append(study_name_part(key, value, keys));
    }
    arm = study_filesystem_safe(arm.empty() ? "all" : arm);
    Arm& a = arms[arm];
    a.axes = axes;
    const std::string setting = setting_of(run);
    a.runs_of[setting].push_back(run["name"]);
    if (!a.first_run.count(setting)) a.first_run[setting] = run;
  }

  // With objective = "steps_to_target" the scores are steps to target_loss (+inf: never reached).
  const bool steps = manifest->value("objective", std::string("val_loss")) == "steps_to_target";
  const char* score_key = steps ? "selection_steps_to_target" : "selection_loss";
  bool added = false;
  for (const auto& [arm, a] : arms) {
    if (finals["arms"].contains(arm)) continue;  // chosen before
    std::map<std::string, double> median;        // over the setting's sweep seeds
    bool known = true;
    for (const auto& [setting, names] : a.runs_of) {
      std::vector<double> scores;
      for (const std::string& name : names) {
        const std::optional<double> loss = loss_of(name);
        if (!loss) {
          known = false;
          break;
        }
        scores.push_back(*loss);
      }
      if (!known) break;
      median[setting] = study_seed_median(std::move(scores));
    }
    if (!known) continue;  // wait for the arm's sweep
    const std::string* best = nullptr;
    for (const auto& [setting, m] : median)
      if (std::isfinite(m) && (!best || m < median[*best])) best = &setting;
    if (!best) {
      finals["arms"][arm] = {{"from", nullptr},
                             {score_key, nullptr},
                             {"settings", median.size()},
                             {"axes", a.axes},
                             {"note", steps ? "no setting reached target_loss: no finals"
                                            : "every setting failed: no finals"}};
      continue;
    }
    finals["arms"][arm] = {
        {"from", *best}, {score_key, median[*best]}, {"settings", median.size()}, {"axes", a.axes}};
    const json& chosen = a.first_run.at(*best);
    auto add_runs = [&](const std::string& final_arm, bool wall_clock) {
      for (const json& seed : finals["seeds"]) {
        const std::string seed_text = std::to_string(seed.get<int64_t>());
        json run = chosen;
        run.erase("sweep");
        std::string name = "final_";
        name.append(final_arm).append("_seed").append(seed_text);
        run["name"] = study_filesystem_safe(name);
        run["axes"][kSeedAxis] = seed_text;
        run["overrides"][kSeedAxis] = seed_text;
        run["phase"] = "final";
        run["arm"] = final_arm;
        run["from"] = *best;
        if (wall_clock) {
          // Zero, not absent: a budget of the base config file must not end the run early.
          run["overrides"]["train.max_tokens"] = "0";
          run["overrides"]["train.max_steps"] = "0";
          run["overrides"]["train.max_seconds"] =
              seconds_text(finals["wall_clock_seconds"].get<double>());
          run["wall_clock"] = true;
          pin_run_length(chosen, &run);
        }
        study_validate_run(manifest->value("config", std::string()),
                           run["overrides"].get<std::map<std::string, std::string>>(),
                           "study finals: run " + run["name"].get<std::string>());
        (*manifest)["runs"].push_back(run);
      }
      added = true;
    };
    add_runs(arm, false);
    if (finals["wall_clock_seconds"].is_number()) {
      bool matches = true;
      for (const auto& [k, v] : finals["wall_clock_from"].items())
        matches = matches && a.axes.contains(k) && a.axes[k] == v;
      if (matches) {
        std::string wall_arm = arm;
        wall_arm.append("_wall")
            .append(study_number_name(seconds_text(finals["wall_clock_seconds"].get<double>())))
            .append("s");
        finals["arms"][wall_arm] = finals["arms"][arm];
        finals["arms"][wall_arm]["wall_clock"] = true;
        add_runs(wall_arm, true);
      }
    }
  }
  return added;
}

}  // namespace ledgerlm
