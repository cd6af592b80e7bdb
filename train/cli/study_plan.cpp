// Study files expanded into run manifests (see study_plan.h).
#include "train/cli/study_plan.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <toml++/toml.h>

#include "model/base/atomic_file.h"
#include "model/base/check.h"
#include "model/base/input_file.h"
#include "train/config/config_file.h"
#include "train/config/config_keys.h"
#include "train/config/run_config.h"

namespace ledgerlm {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kBatchAxis = "batch";  // WORLDxMICROxACCUM
// Derived keys: the LR scaled from its value at lr_base_batch sequences to the run's global batch
// (fixed: unchanged, linear: x G/G0, sqrt: x sqrt(G/G0)), and the warmup as a fraction of the
// run's steps. They are study keys, not config keys: a run trains with what they derive.
constexpr const char* kLrRule = "lr_rule";
constexpr const char* kLrBaseBatch = "lr_base_batch";
constexpr const char* kWarmupFraction = "warmup_fraction";
// Derived budget: train.max_tokens = budget_tokens + budget_steps x (G x seq_len) (steps to a
// target need enough tokens at a small batch and enough steps at a large one); and the evals
// spaced in tokens: train.eval_interval = max(1, round(eval_tokens / (G x seq_len))).
constexpr const char* kBudgetTokens = "budget_tokens";
constexpr const char* kBudgetSteps = "budget_steps";
constexpr const char* kEvalTokens = "eval_tokens";
// Derived second-moment decay: optim.beta2 = 0.5^(G x seq_len / beta2_half_life), so that the
// second moment's memory is the same number of tokens at every global batch (Marek et al. 2025:
// a fixed beta2 remembers G times more tokens at batch G than at batch 1). 0: beta2 as set.
constexpr const char* kBeta2HalfLife = "beta2_half_life";
constexpr const char* kOptimAxis = "optim.name";
constexpr const char* kLrKey = "optim.lr";
constexpr const char* kSeedAxis = "train.seed";

std::string line_of(const toml::node& node) {
  return node.source().begin.line > 0 ? error_message(" (line ", node.source().begin.line, ")")
                                      : std::string();
}

// A TOML scalar as the text a --section.key flag takes.
std::string scalar_text(const toml::node& node, const std::string& where) {
  if (const auto* s = node.as_string()) return s->get();
  if (const auto* i = node.as_integer()) return std::to_string(i->get());
  if (const auto* b = node.as_boolean()) return b->get() ? "true" : "false";
  if (const auto* f = node.as_floating_point()) {
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, f->get());
    return std::string(buf, res.ptr);
  }
  fail(error_message(where, ": expected a string, number or boolean", line_of(node)));
}

// Checks KEY = TEXT against the key registry and returns the value's canonical text (numbers in
// their shortest exact form, so 3e-3 and 0.003 name the same run).
std::string canonical_value(const std::string& key, const std::string& text,
                            const std::string& where) {
  RunConfig cfg;
  for (const ConfigKey& k : config_keys(cfg)) {
    if (k.full() != key) continue;
    config_set(k, text, where);
    if (k.type == KeyType::kString) return *static_cast<std::string*>(k.field);
    return config_value_text(k);
  }
  fail(error_message(where, ": '", key, "' is no config key (see ledgerlm train --help)"));
}

// WORLDxMICROxACCUM, each a positive integer.
std::vector<int64_t> parse_batch(const std::string& text, const std::string& where) {
  std::vector<int64_t> parts;
  std::stringstream ss(text);
  std::string piece;
  while (std::getline(ss, piece, 'x')) {
    int64_t v = 0;
    const auto res = std::from_chars(piece.data(), piece.data() + piece.size(), v);
    if (res.ec != std::errc() || res.ptr != piece.data() + piece.size() || v < 1) {
      parts.clear();  // not a positive integer: refused below
      break;
    }
    parts.push_back(v);
  }
  LLM_REQUIRE(parts.size() == 3, where, ": batch '", text,
              "': expected WORLDxMICROxACCUM, three positive integers such as 2x8x1");
  return parts;
}

bool is_study_key(const std::string& key) {
  return key == kBatchAxis || key == kLrRule || key == kLrBaseBatch || key == kWarmupFraction ||
         key == kBudgetTokens || key == kBudgetSteps || key == kEvalTokens || key == kBeta2HalfLife;
}

// The canonical text of a study key's value (see kLrRule), or an error naming it.
std::string study_key_value(const std::string& key, const std::string& text,
                            const std::string& where) {
  if (key == kBatchAxis) {
    parse_batch(text, where);
    return text;
  }
  if (key == kLrRule) {
    LLM_REQUIRE(text == "fixed" || text == "linear" || text == "sqrt", where, ": '", text,
                "': expected fixed, linear or sqrt");
    return text;
  }
  double v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  const bool number = res.ec == std::errc() && res.ptr == text.data() + text.size();
  if (key == kBudgetTokens || key == kBudgetSteps || key == kEvalTokens || key == kBeta2HalfLife) {
    const double least = key == kEvalTokens ? 1 : 0;
    LLM_REQUIRE(number && v >= least && v == std::floor(v) && v < 1e15, where, ": '", text,
                "': expected an integer >= ", least,
                key == kBudgetSteps ? " (steps)" : " (tokens)");
    return std::to_string(static_cast<int64_t>(v));
  }
  if (key == kLrBaseBatch) {
    LLM_REQUIRE(number && v >= 1 && v == std::floor(v) && v < 1e15, where, ": '", text,
                "': expected a global batch in sequences (an integer >= 1)");
    return std::to_string(static_cast<int64_t>(v));
  }
  LLM_REQUIRE(number && v >= 0 && v < 1, where, ": '", text,
              "': expected a fraction of the run's steps in [0, 1)");
  char buf[64];
  const auto out = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, out.ptr);
}

// One axis: a key and its values (canonical text), or an LR sweep.
struct Axis {
  std::vector<std::string> values;
  bool sweep = false;
};

struct Sweep {
  double center = 0.0;
  int64_t points = 5;
  int64_t max_points = 9;
};

// The axes of one table ([axes] or [grid.OPT]): arrays are axes, scalars fixed overrides, nested
// tables dotted keys; lr_center / lr_points / lr_max_points describe an "optim.lr" = "sweep".
struct AxisTable {
  std::map<std::string, Axis> axes;
  std::map<std::string, std::string> fixed;
  std::optional<Sweep> sweep;
};

void read_axis_table(const toml::table& table, const std::string& prefix, const std::string& where,
                     AxisTable* out, std::map<std::string, const toml::node*>* sweep_params) {
  for (const auto& [k, node] : table) {
    // A bare `lr` is optim.lr (the sweep's short form: lr = "sweep", lr_center = ...).
    std::string key = prefix + std::string(k.str());
    if (key == "lr") key = kLrKey;
    const std::string at = where + "." + key;
    if (prefix.empty() && (key == "lr_center" || key == "lr_points" || key == "lr_max_points")) {
      (*sweep_params)[key] = &node;
    } else if (const auto* sub = node.as_table()) {
      read_axis_table(*sub, key + ".", where, out, sweep_params);
    } else if (const auto* arr = node.as_array()) {
      LLM_REQUIRE(!arr->empty(), at, ": expected at least one value", line_of(node));
      Axis axis;
      for (const auto& v : *arr) {
        const std::string text = scalar_text(v, at);
        axis.values.push_back(is_study_key(key) ? study_key_value(key, text, at)
                                                : canonical_value(key, text, at));
      }
      std::set<std::string> seen(axis.values.begin(), axis.values.end());
      LLM_REQUIRE(seen.size() == axis.values.size(), at, ": a value appears twice", line_of(node));
      out->axes[key] = axis;
    } else if (key == kLrKey && node.is_string() && node.as_string()->get() == "sweep") {
      out->axes[key] = Axis{{}, true};
    } else {
      const std::string text = scalar_text(node, at);
      out->fixed[key] =
          is_study_key(key) ? study_key_value(key, text, at) : canonical_value(key, text, at);
    }
  }
}

AxisTable axis_table(const toml::table& table, const std::string& where) {
  AxisTable out;
  std::map<std::string, const toml::node*> params;
  read_axis_table(table, "", where, &out, &params);
  const bool is_sweep = out.axes.count(kLrKey) && out.axes[kLrKey].sweep;
  if (!is_sweep) {
    LLM_REQUIRE(params.empty(), where, ": ", params.empty() ? "" : params.begin()->first,
                " belongs to an LR sweep (\"optim.lr\" = \"sweep\" in the same table)");
    return out;
  }
  Sweep s;
  LLM_REQUIRE(params.count("lr_center"), where,
              ": \"optim.lr\" = \"sweep\" needs lr_center (the LR the sweep is centred on)");
  const toml::node& c = *params["lr_center"];
  LLM_REQUIRE(c.is_number(), where, ".lr_center: expected a number > 0", line_of(c));
  s.center =
      c.is_integer() ? static_cast<double>(c.as_integer()->get()) : c.as_floating_point()->get();
  LLM_REQUIRE(s.center > 0 && std::isfinite(s.center), where, ".lr_center: expected > 0");
  auto int_param = [&](const char* name, int64_t fallback) {
    if (!params.count(name)) return fallback;
    const toml::node& n = *params[name];
    LLM_REQUIRE(n.is_integer(), where, ".", name, ": expected an integer", line_of(n));
    return n.as_integer()->get();
  };
  s.points = int_param("lr_points", 5);
  LLM_REQUIRE(s.points >= 5, where, ".lr_points: expected >= 5 (got ", s.points, ")");
  s.max_points = int_param("lr_max_points", s.points + 4);
  LLM_REQUIRE(s.max_points >= s.points, where, ".lr_max_points: expected >= lr_points (", s.points,
              "), got ", s.max_points);
  out.sweep = s;
  return out;
}

// Flattens a [base] table into dotted keys with canonical values.
void read_base(const toml::table& table, const std::string& prefix,
               std::map<std::string, std::string>* out) {
  for (const auto& [k, node] : table) {
    const std::string key = prefix + std::string(k.str());
    if (const auto* sub = node.as_table())
      read_base(*sub, key + ".", out);
    else if (is_study_key(key))
      (*out)[key] = study_key_value(key, scalar_text(node, "base." + key), "base." + key);
    else
      (*out)[key] = canonical_value(key, scalar_text(node, "base." + key), "base." + key);
  }
}

// Applies the derived keys (kLrRule, kWarmupFraction, the budget, eval and beta2 keys) of one run
// to its overrides, given its world size; they leave the overrides (the trainer has no such keys).
void derive_keys(std::map<std::string, std::string>* overrides, int64_t world,
                 const std::string& where) {
  auto& ov = *overrides;
  const bool rule = ov.count(kLrRule) > 0, warmup = ov.count(kWarmupFraction) > 0;
  const bool budget = ov.count(kBudgetTokens) > 0 || ov.count(kBudgetSteps) > 0;
  // A half-life of 0 derives nothing: optim.beta2 stays as set (an axis [0, H] compares the two).
  const bool eval = ov.count(kEvalTokens) > 0;
  const bool half_life = ov.count(kBeta2HalfLife) > 0 && ov[kBeta2HalfLife] != "0";
  if (!half_life) ov.erase(kBeta2HalfLife);
  if (!rule && !warmup && !budget && !eval && !half_life) {
    LLM_REQUIRE(!ov.count(kLrBaseBatch), where, ": ", kLrBaseBatch, " needs ", kLrRule);
    return;
  }
  auto integer = [&](const char* key, int64_t fallback) -> int64_t {
    return ov.count(key) ? std::stoll(ov[key]) : fallback;
  };
  const char* first = rule        ? kLrRule
                      : budget    ? (ov.count(kBudgetTokens) ? kBudgetTokens : kBudgetSteps)
                      : eval      ? kEvalTokens
                      : half_life ? kBeta2HalfLife
                                  : kWarmupFraction;
  LLM_REQUIRE(ov.count("train.micro_batch"), where, ": ", first,
              " needs the global batch in the study file (batch = \"WORLDxMICROxACCUM\", or "
              "train.micro_batch)");
  const int64_t global = world * integer("train.micro_batch", 1) * integer("train.accum", 1);
  if (budget || eval || half_life)
    LLM_REQUIRE(ov.count("train.seq_len"), where, ": ", first,
                " needs train.seq_len in the study file (the tokens of a step)");
  const int64_t per_step = global * integer("train.seq_len", 1);
  if (budget) {
    for (const char* key : {"train.max_tokens", "train.max_steps", "train.max_seconds"})
      LLM_REQUIRE(!ov.count(key), where, ": ", first, " sets the run's budget: drop ", key,
                  " from the study file");
    const int64_t tokens = integer(kBudgetTokens, 0) + integer(kBudgetSteps, 0) * per_step;
    LLM_REQUIRE(tokens > 0, where, ": ", kBudgetTokens, " + ", kBudgetSteps,
                " x tokens per step is 0: expected at least one of them > 0");
    ov["train.max_tokens"] = std::to_string(tokens);
    // Zero, not absent: a budget of the base config file must not end the run early.
    ov["train.max_steps"] = "0";
    ov["train.max_seconds"] = "0";
  }
  if (eval) {
    LLM_REQUIRE(!ov.count("train.eval_interval"), where, ": ", kEvalTokens,
                " sets train.eval_interval: drop it from the study file");
    const int64_t x = integer(kEvalTokens, 1);
    // round(X / per_step) in integers, at least 1: every step once a step holds more than X.
    ov["train.eval_interval"] =
        std::to_string(std::max<int64_t>(1, (2 * x + per_step) / (2 * per_step)));
  }
  if (half_life) {
    LLM_REQUIRE(!ov.count("optim.beta2"), where, ": ", kBeta2HalfLife,
                " sets optim.beta2: drop it from the study file");
    const double beta2 = std::pow(
        0.5, static_cast<double>(per_step) / static_cast<double>(integer(kBeta2HalfLife, 1)));
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, beta2);
    ov["optim.beta2"] = canonical_value("optim.beta2", std::string(buf, res.ptr), where);
  }
  if (rule) {
    LLM_REQUIRE(ov.count(kLrBaseBatch), where, ": ", kLrRule, " needs ", kLrBaseBatch,
                " (the global batch at which optim.lr is given)");
    LLM_REQUIRE(ov.count(kLrKey), where, ": ", kLrRule, " needs optim.lr (the LR at ", kLrBaseBatch,
                ")");
    const double ratio =
        static_cast<double>(global) / static_cast<double>(std::stoll(ov[kLrBaseBatch]));
    const double power = ov[kLrRule] == "linear" ? 1.0 : ov[kLrRule] == "sqrt" ? 0.5 : 0.0;
    const double lr = std::stod(ov[kLrKey]) * std::pow(ratio, power);
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, lr);
    ov[kLrKey] = canonical_value(kLrKey, std::string(buf, res.ptr), where);
  }
  if (warmup) {
    int64_t steps = integer("train.max_steps", 0);
    if (steps == 0) {
      LLM_REQUIRE(ov.count("train.max_tokens") && ov.count("train.seq_len"), where, ": ",
                  kWarmupFraction,
                  " needs the run's steps: train.max_steps, or train.max_tokens and train.seq_len");
      steps = (integer("train.max_tokens", 0) + per_step - 1) / per_step;
    }
    const double f = std::stod(ov[kWarmupFraction]);
    ov["optim.warmup_steps"] =
        std::to_string(static_cast<int64_t>(std::llround(f * static_cast<double>(steps))));
  }
  ov.erase(kLrRule);
  ov.erase(kLrBaseBatch);
  ov.erase(kWarmupFraction);
  ov.erase(kBudgetTokens);
  ov.erase(kBudgetSteps);
  ov.erase(kEvalTokens);
  ov.erase(kBeta2HalfLife);
}

}  // namespace

// The short form of an axis key in run names: "lr" for optim.lr, unless another axis ends alike.
std::string study_name_part(const std::string& key, const std::string& value,
                            const std::vector<std::string>& all_keys) {
  if (key == kOptimAxis) return value;
  if (key == kBatchAxis) return "b" + value;
  if (key == kLrRule) return "lr-" + value;
  if (key == kBudgetTokens) return "tok" + value;
  if (key == kBudgetSteps) return "steps" + value;
  if (key == kEvalTokens) return "evaltok" + value;
  if (key == kBeta2HalfLife) return "b2hl" + value;
  auto tail = [](const std::string& k) { return k.substr(k.rfind('.') + 1); };
  int same = 0;
  for (const std::string& k : all_keys) same += tail(k) == tail(key);
  std::string label = same > 1 ? key : tail(key);
  for (char& ch : label)
    if (ch == '.') ch = '-';
  return label + study_number_name(value);
}

std::string study_number_name(const std::string& text) {
  double v = 0;
  const auto res = std::from_chars(text.data(), text.data() + text.size(), v);
  if (res.ec != std::errc() || res.ptr != text.data() + text.size()) return text;
  const size_t e = text.find("e+");
  if (e == std::string::npos) return text;
  size_t digits = e + 2;
  while (digits + 1 < text.size() && text[digits] == '0') ++digits;
  return text.substr(0, e + 1) + text.substr(digits);
}

std::string study_filesystem_safe(std::string name) {
  for (char& ch : name) {
    const bool ok =
        std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '_';
    if (!ok) ch = '-';
  }
  return name;
}

namespace {

std::string lr_text(double center, int exponent, const std::string& where) {
  return canonical_value(
      kLrKey,
      [&] {
        char buf[64];
        const auto res = std::to_chars(buf, buf + sizeof buf, std::ldexp(center, exponent));
        return std::string(buf, res.ptr);
      }(),
      where);
}

// A scalar of a [finals] table as a number (integers too).
std::optional<double> number_of(const toml::node& node) {
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  if (const auto* f = node.as_floating_point()) return f->get();
  return std::nullopt;
}

// [finals]: seeds (fresh, none of the train.seed axis), select (the axes that make an arm),
// split, and an optional [finals.wall_clock] (seconds, from).
json read_finals(const toml::table& table, const std::string& where, const AxisTable& axes,
                 const std::map<std::string, AxisTable>& grids) {
  static const std::set<std::string> known = {"seeds", "select", "split", "wall_clock"};
  for (const auto& [k, node] : table)
    LLM_REQUIRE(known.count(std::string(k.str())), where, ": unknown key '", k.str(), "'",
                line_of(node), " (expected seeds, select, split, [finals.wall_clock])");
  // Every key that is an axis somewhere (the study's or a grid's).
  std::set<std::string> axis_keys;
  for (const auto& [k, a] : axes.axes) axis_keys.insert(k);
  for (const auto& [opt, g] : grids)
    for (const auto& [k, a] : g.axes) axis_keys.insert(k);
  if (!grids.empty()) axis_keys.insert(kOptimAxis);

  json seeds = json::array();
  std::set<int64_t> seen;
  if (const auto* arr = table["seeds"].as_array()) {
    for (const auto& v : *arr) {
      const auto* i = v.as_integer();
      LLM_REQUIRE(i && i->get() >= 0, where, ".seeds: expected integers >= 0", line_of(v));
      LLM_REQUIRE(seen.insert(i->get()).second, where, ".seeds: ", i->get(), " appears twice");
      seeds.push_back(i->get());
    }
  } else {
    LLM_REQUIRE(!table.contains("seeds"), where, ".seeds: expected an array of integers");
    for (int64_t s = 1001; s <= 1005; ++s) {
      seeds.push_back(s);
      seen.insert(s);
    }
  }
  LLM_REQUIRE(seeds.size() >= 2, where,
              ".seeds: expected at least 2 fresh seeds (a confidence interval needs two; a "
              "report of record wants 3 or more)");
  std::vector<std::string> sweep_seeds;
  if (axes.axes.count(kSeedAxis)) sweep_seeds = axes.axes.at(kSeedAxis).values;
  for (const auto& [opt, g] : grids)
    if (g.axes.count(kSeedAxis))
      sweep_seeds.insert(sweep_seeds.end(), g.axes.at(kSeedAxis).values.begin(),
                         g.axes.at(kSeedAxis).values.end());
  for (const std::string& s : sweep_seeds)
    LLM_REQUIRE(!seen.count(std::stoll(s)), where, ".seeds: ", s,
                " is a seed of the train.seed axis (finals need fresh seeds)");

  json select = json::array();
  if (const auto* arr = table["select"].as_array()) {
    for (const auto& v : *arr) {
      const auto* str = v.as_string();
      LLM_REQUIRE(str, where, ".select: expected axis keys (strings)", line_of(v));
      std::string key = str->get();
      if (key == "lr") key = kLrKey;
      LLM_REQUIRE(key != kSeedAxis && key != kLrKey, where, ".select: '", key,
                  "' cannot make an arm (the finals choose it)");
      LLM_REQUIRE(axis_keys.count(key), where, ".select: '", key, "' is no axis of the study");
      select.push_back(key);
    }
  } else {
    LLM_REQUIRE(!table.contains("select"), where, ".select: expected an array of axis keys");
    if (axis_keys.count(kOptimAxis)) select.push_back(kOptimAxis);
  }

  const std::string split = table["split"].value_or(std::string("auto"));
  LLM_REQUIRE(split == "auto" || split == "val" || split == "test", where,
              ".split: expected auto, "
              "val or test (got '",
              split, "')");

  json out = {{"seeds", seeds},
              {"select", select},
              {"split", split},
              {"wall_clock_seconds", nullptr},
              {"wall_clock_from", json::object()},
              {"arms", json::object()}};
  if (const auto* wc = table["wall_clock"].as_table()) {
    static const std::set<std::string> wc_known = {"seconds", "from"};
    for (const auto& [k, node] : *wc)
      LLM_REQUIRE(wc_known.count(std::string(k.str())), where, ".wall_clock: unknown key '",
                  k.str(), "'", line_of(node), " (expected seconds, from)");
    const toml::node* seconds = (*wc)["seconds"].node();
    const auto secs = seconds ? number_of(*seconds) : std::nullopt;
    LLM_REQUIRE(secs && *secs > 0 && std::isfinite(*secs), where,
                ".wall_clock.seconds: expected a number of seconds > 0");
    out["wall_clock_seconds"] = *secs;
    if (const auto* from = (*wc)["from"].as_table()) {
      for (const auto& [k, node] : *from) {
        const std::string key(k.str());
        LLM_REQUIRE(std::find(select.begin(), select.end(), key) != select.end(), where,
                    ".wall_clock.from: '", key, "' is not one of finals.select");
        out["wall_clock_from"][key] =
            canonical_value(key, scalar_text(node, where + ".wall_clock.from." + key),
                            where + ".wall_clock.from." + key);
      }
    } else {
      LLM_REQUIRE(!(*wc).contains("from"), where, ".wall_clock.from: expected a table");
    }
  } else {
    LLM_REQUIRE(!table.contains("wall_clock"), where, ".wall_clock: expected a table");
  }
  return out;
}

}  // namespace

// Checks that a run's config is one `ledgerlm train` accepts (the base config file, then its
// overrides, then every section's validation), so that a bad combination (a schedule an optimizer
// refuses, a key out of range) is one line at plan time naming the run, not a failed run later.
// The vocabulary comes from the data at train time: a stand-in is used when the file leaves it 0.
namespace {

// The config a run trains with: the base config file (empty: none) with OVERRIDES applied,
// validated; an error starts with WHERE.
RunConfig run_config_of(const std::string& config_file,
                        const std::map<std::string, std::string>& ov, const std::string& where) {
  RunConfig cfg;
  const std::vector<ConfigKey> keys = config_keys(cfg);
  try {
    if (!config_file.empty()) config_load_file(config_file, keys);
    for (const auto& [key, value] : ov)
      for (const ConfigKey& k : keys)
        if (k.full() == key) config_set(k, value, key);
    if (cfg.model.vocab_size == 0) cfg.model.vocab_size = 256;
    cfg.validate();
  } catch (const Error& e) {
    fail(error_message(where, ": ", e.what()));
  }
  return cfg;
}

}  // namespace

void study_validate_run(const std::string& config_file,
                        const std::map<std::string, std::string>& ov, const std::string& where) {
  run_config_of(config_file, ov, where);
}

json study_spread_ranks(const json& manifest, const json& run, int64_t ranks) {
  const int64_t world = run.value("world", int64_t{1});
  if (ranks <= 0 || ranks == world) return run;
  const std::string name = run.value("name", std::string());
  const std::string where = "study run: --ranks-per-run " + std::to_string(ranks) + ": run " + name;
  const RunConfig cfg =
      run_config_of(manifest.value("config", std::string()),
                    run["overrides"].get<std::map<std::string, std::string>>(), where);
  // The accumulation stays: the sequences of one micro-batch step (world x micro-batch) are
  // shared out anew, so the global batch, and with it the run's LR, schedule and data, is the
  // same.
  const int64_t per_micro_step = world * cfg.train.micro_batch;
  LLM_REQUIRE(per_micro_step % ranks == 0, where, ": its ", per_micro_step,
              " sequences per micro-batch step (world ", world, " x micro-batch ",
              cfg.train.micro_batch, ") cannot be shared by ", ranks,
              " ranks: expected a divisor of ", per_micro_step);
  json out = run;
  out["world"] = ranks;
  out["overrides"]["train.micro_batch"] = std::to_string(per_micro_step / ranks);
  return out;
}

int study_sweep_edge(const std::map<int, double>& loss_by_exponent) {
  if (loss_by_exponent.size() < 3) return 0;
  const std::pair<const int, double>* best = nullptr;
  for (const auto& p : loss_by_exponent)
    if (std::isfinite(p.second) && (!best || p.second < best->second)) best = &p;
  if (!best) return 0;
  if (best->first == loss_by_exponent.begin()->first) return -1;
  if (best->first == loss_by_exponent.rbegin()->first) return 1;
  return 0;
}

namespace {

// The study's objective (what sweep widening and finals selection minimise): "val_loss", the
// final val loss, or "steps_to_target", the steps to target_loss (study_objective.h).
void read_objective(const toml::table& doc, const std::string& origin, json* manifest) {
  std::string objective = "val_loss";
  if (const toml::node* o = doc["objective"].node()) {
    LLM_REQUIRE(o->is_string(), origin, ": objective: expected \"val_loss\" or \"steps_to_target\"",
                line_of(*o));
    objective = o->as_string()->get();
    LLM_REQUIRE(objective == "val_loss" || objective == "steps_to_target", origin, ": objective '",
                objective, "': expected val_loss or steps_to_target", line_of(*o));
  }
  (*manifest)["objective"] = objective;
  (*manifest)["target_loss"] = nullptr;
  const toml::node* t = doc["target_loss"].node();
  if (objective == "val_loss") {
    LLM_REQUIRE(!t, origin, ": target_loss belongs to objective = \"steps_to_target\"");
    return;
  }
  LLM_REQUIRE(t, origin,
              ": objective = \"steps_to_target\" needs target_loss (the val loss to "
              "reach, > 0)");
  const std::optional<double> v = number_of(*t);
  LLM_REQUIRE(v && *v > 0 && std::isfinite(*v), origin, ": target_loss: expected a number > 0",
              line_of(*t));
  (*manifest)["target_loss"] = *v;
}

// The arms a study's `baseline` may name, as the report groups runs (scripts/study_report.py):
// with [finals], an optim.name value or a finals arm (the select axes' name parts, as
// study_plan_finals names them); without, a setting: a run's name without its seed part.
std::set<std::string> baseline_candidates(const json& manifest) {
  std::set<std::string> arms;
  const bool finals = manifest.contains("finals");
  for (const json& run : manifest["runs"]) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : run["axes"].items()) keys.push_back(k);
    auto value_of = [&](const std::string& key) -> std::string {
      if (run["axes"].contains(key)) return run["axes"][key];
      if (run["overrides"].contains(key)) return run["overrides"][key];
      return "";
    };
    if (finals) {
      if (const std::string opt = value_of(kOptimAxis); !opt.empty()) arms.insert(opt);
      std::string arm;
      for (const json& key : manifest["finals"]["select"]) {
        if (!arm.empty()) arm.push_back('_');
        arm.append(study_name_part(key, value_of(key.get<std::string>()), keys));
      }
      arms.insert(study_filesystem_safe(arm.empty() ? "all" : arm));
      continue;
    }
    const std::string name = run["name"];
    if (!run["axes"].contains(kSeedAxis)) {
      arms.insert(name);
      continue;
    }
    const std::string seed =
        study_filesystem_safe(study_name_part(kSeedAxis, run["axes"][kSeedAxis], keys));
    if (name == seed) {
      arms.insert("all");
    } else if (name.size() > seed.size() + 1 &&
               name.compare(name.size() - seed.size() - 1, seed.size() + 1, "_" + seed) == 0) {
      arms.insert(name.substr(0, name.size() - seed.size() - 1));
    } else {
      arms.insert(name);
    }
  }
  return arms;
}

// A `baseline` naming no arm would only show when the report runs, after the study trained: it
// is refused when planned, naming the arms it could be.
void check_baseline(const json& manifest, const std::string& origin) {
  if (!manifest["baseline"].is_string()) return;
  const std::string baseline = manifest["baseline"];
  const std::set<std::string> arms = baseline_candidates(manifest);
  if (arms.count(baseline)) return;
  std::string list;
  int shown = 0;
  for (const std::string& a : arms) {
    if (shown++ == 8) {
      list += ", ...";
      break;
    }
    list += (list.empty() ? "" : ", ") + a;
  }
  fail(error_message(origin, ": baseline '", baseline, "' names no arm of the study (",
                     manifest.contains("finals") ? "an optim.name value or a finals arm"
                                                 : "a run name without its seed part",
                     ": ", list, ")"));
}

}  // namespace

json study_plan(const std::string& study_path, const json& previous) {
  std::error_code ec;
  LLM_REQUIRE(fs::exists(study_path, ec), "study file '", study_path, "' not found");
  const std::string text = input_file_read(study_path, "study file");
  toml::table doc;
  try {
    doc = toml::parse(text, study_path);
  } catch (const toml::parse_error& e) {
    fail(error_message(study_path, ": ", e.description(), " (line ", e.source().begin.line, ")"));
  }
  const std::string origin = study_path;
  static const std::set<std::string> known = {"name", "config", "baseline",  "base",       "axes",
                                              "grid", "finals", "objective", "target_loss"};
  for (const auto& [k, node] : doc)
    LLM_REQUIRE(
        known.count(std::string(k.str())), origin, ": unknown key '", k.str(), "'", line_of(node),
        " (expected name, config, baseline, objective, target_loss, [base], [axes], [grid.OPT], "
        "[finals])");

  json manifest = {{"format", 1},
                   {"study", fs::absolute(study_path).lexically_normal().string()},
                   {"name", doc["name"].value_or(fs::path(study_path).stem().string())},
                   {"config", ""},
                   {"baseline", nullptr}};
  if (const auto* c = doc["config"].as_string()) {
    fs::path cfg = c->get();
    if (cfg.is_relative()) cfg = fs::absolute(study_path).parent_path() / cfg;
    LLM_REQUIRE(fs::is_regular_file(cfg), origin, ": config '", c->get(), "' not found (",
                cfg.lexically_normal().string(), ")");
    manifest["config"] = cfg.lexically_normal().string();
  } else {
    LLM_REQUIRE(!doc.contains("config"), origin, ": config: expected a file path string");
  }
  if (const auto* b = doc["baseline"].as_string()) manifest["baseline"] = b->get();
  read_objective(doc, origin, &manifest);

  std::map<std::string, std::string> base;
  if (const auto* t = doc["base"].as_table()) read_base(*t, "", &base);
  AxisTable axes;
  if (const auto* t = doc["axes"].as_table()) axes = axis_table(*t, origin + ": axes");
  std::map<std::string, AxisTable> grids;
  if (const auto* t = doc["grid"].as_table()) {
    for (const auto& [k, node] : *t) {
      const std::string opt(k.str());
      LLM_REQUIRE(node.is_table(), origin, ": grid.", opt, ": expected a table", line_of(node));
      grids[opt] = axis_table(*node.as_table(), origin + ": grid." + opt);
    }
  }
  const bool by_optimizer = axes.axes.count(kOptimAxis) > 0;
  for (const auto& [opt, g] : grids) {
    const auto& opts = by_optimizer ? axes.axes[kOptimAxis].values : std::vector<std::string>{};
    LLM_REQUIRE(std::find(opts.begin(), opts.end(), opt) != opts.end(), origin, ": grid.", opt,
                ": '", opt, "' is not a value of the optim.name axis");
    LLM_REQUIRE(!g.axes.count(kOptimAxis) && !g.fixed.count(kOptimAxis), origin, ": grid.", opt,
                ": optim.name is set by the grid's name");
  }

  // The finals' arms (finals.select) also scope the LR sweeps below.
  std::vector<std::string> select_keys;
  if (const auto* t = doc["finals"].as_table()) {
    manifest["finals"] = read_finals(*t, origin + ": finals", axes, grids);
    if (previous.is_object() && previous.contains("finals") && previous["finals"].contains("arms"))
      manifest["finals"]["arms"] = previous["finals"]["arms"];
    for (const json& k : manifest["finals"]["select"]) select_keys.push_back(k.get<std::string>());
  } else {
    LLM_REQUIRE(!doc.contains("finals"), origin, ": finals: expected a table ([finals])");
  }
  const json prev_sweeps =
      previous.is_object() && previous.contains("sweeps") ? previous["sweeps"] : json::object();
  json sweeps = json::object();
  json runs = json::array();
  std::set<std::string> names;
  const std::vector<std::string> optimizers =
      by_optimizer ? axes.axes[kOptimAxis].values : std::vector<std::string>{""};
  for (const std::string& opt : optimizers) {
    // This optimizer's axes: the study's, with its grid's entries over them.
    AxisTable mine = axes;
    if (by_optimizer) mine.axes[kOptimAxis] = Axis{{opt}, false};
    if (grids.count(opt)) {
      const AxisTable& g = grids[opt];
      for (const auto& [k, a] : g.axes) {
        mine.axes[k] = a;
        mine.fixed.erase(k);
      }
      for (const auto& [k, v] : g.fixed) {
        mine.fixed[k] = v;
        mine.axes.erase(k);
      }
      if (g.sweep) mine.sweep = g.sweep;
    }
    // A sweep is widened per arm: per optimizer, and per value of every other finals.select
    // axis (the batch of a batch-size study, the budget of an optimizer study), since each arm's
    // finals take its own best LR. The scope names the arm; widenings planned before under the
    // optimizer's name alone (an older manifest) apply to each of its arms.
    const std::string opt_scope = by_optimizer ? opt : "*";
    auto scope_of = [&](const json& axis_values) {
      std::string scope = by_optimizer ? opt : "";
      for (const std::string& key : select_keys)
        if (key != kOptimAxis && axis_values.contains(key))
          scope += (scope.empty() ? "" : "_") +
                   study_name_part(key, axis_values[key].get<std::string>(), select_keys);
      return scope.empty() ? opt_scope : scope;
    };
    auto widened = [&](const std::string& scope, const char* side) {
      const std::string from = prev_sweeps.contains(scope) ? scope : opt_scope;
      return prev_sweeps.contains(from) ? prev_sweeps[from].value(side, 0) : 0;
    };
    std::map<std::string, int> exponent_of;  // an LR's text -> its exponent in the sweep
    std::optional<Sweep> sweep;
    if (mine.axes.count(kLrKey) && mine.axes[kLrKey].sweep) {
      sweep = *mine.sweep;
      // The LR axis holds every exponent some arm may use; each arm keeps its own range below.
      int low = 0, high = 0;
      for (const auto& [scope, sw] : prev_sweeps.items())
        if (!by_optimizer || scope == opt || scope.rfind(opt + "_", 0) == 0) {
          low = std::max(low, sw.value("low", 0));
          high = std::max(high, sw.value("high", 0));
        }
      const int lo = -static_cast<int>((sweep->points - 1) / 2) - low;
      const int hi = static_cast<int>(sweep->points / 2) + high;
      std::vector<std::string> values;
      for (int e = lo; e <= hi; ++e) {
        values.push_back(lr_text(sweep->center, e, origin + ": sweep"));
        exponent_of[values.back()] = e;
      }
      mine.axes[kLrKey].values = values;
    }
    // Axis order (names and the product): the optimizer first, the seed last, the rest sorted;
    // the first key varies slowest.
    std::vector<std::string> keys;
    for (const auto& [k, a] : mine.axes) keys.push_back(k);
    auto rank = [](const std::string& k) { return k == kOptimAxis ? 0 : k == kSeedAxis ? 2 : 1; };
    std::stable_sort(keys.begin(), keys.end(),
                     [&](const std::string& a, const std::string& b) { return rank(a) < rank(b); });
    std::vector<size_t> at(keys.size(), 0);
    for (bool more = true; more;) {
      json entry = {{"world", 1}};
      std::map<std::string, std::string> overrides = base;
      for (const auto& [k, v] : mine.fixed) overrides[k] = v;
      json axis_values = json::object();
      std::string name;
      for (size_t i = 0; i < keys.size(); ++i) {
        const std::string& v = mine.axes[keys[i]].values[at[i]];
        axis_values[keys[i]] = v;
        name += (name.empty() ? "" : "_") + study_name_part(keys[i], v, keys);
        overrides[keys[i]] = v;
      }
      std::string scope;
      int exponent = 0;
      bool in_sweep = true;
      if (sweep) {
        scope = scope_of(axis_values);
        const int low = widened(scope, "low"), high = widened(scope, "high");
        exponent = exponent_of.at(axis_values[kLrKey].get<std::string>());
        in_sweep = exponent >= -static_cast<int>((sweep->points - 1) / 2) - low &&
                   exponent <= static_cast<int>(sweep->points / 2) + high;
        if (!sweeps.contains(scope))
          sweeps[scope] = {{"center", sweep->center},
                           {"points", sweep->points},
                           {"max_points", sweep->max_points},
                           {"low", low},
                           {"high", high}};
      }
      if (overrides.count(kBatchAxis)) {
        const auto b = parse_batch(overrides[kBatchAxis], origin + ": batch");
        entry["world"] = b[0];
        overrides["train.micro_batch"] = std::to_string(b[1]);
        overrides["train.accum"] = std::to_string(b[2]);
        overrides.erase(kBatchAxis);
      }
      // The report's LR rules start from the batch the LR was given at (derive_keys drops it).
      if (overrides.count(kLrRule) && overrides.count(kLrBaseBatch)) {
        entry["lr_rule"] = overrides[kLrRule];
        entry["lr_base_batch"] = std::stoll(overrides[kLrBaseBatch]);
      }
      derive_keys(&overrides, entry["world"].get<int64_t>(), origin + ": run " + name);
      study_validate_run(manifest["config"], overrides, origin + ": run " + name);
      if (name.empty()) name = "run";
      name = study_filesystem_safe(name);
      study_check_run_name(name, origin + ": run '" + name + "'");
      LLM_REQUIRE(names.insert(name).second, origin, ": two runs would both be named '", name,
                  "' (axis values that differ only in characters a file name cannot hold)");
      entry["name"] = name;
      entry["axes"] = axis_values;
      entry["overrides"] = overrides;
      if (sweep) entry["sweep"] = {{"scope", scope}, {"exponent", exponent}};
      if (in_sweep) runs.push_back(entry);
      // Next combination: the last key varies fastest.
      more = false;
      for (size_t i = keys.size(); i-- > 0;) {
        if (++at[i] < mine.axes[keys[i]].values.size()) {
          more = true;
          break;
        }
        at[i] = 0;
      }
    }
  }

  // Merge with what was planned before: its runs first, unchanged.
  json merged = json::array();
  std::map<std::string, json> planned;
  for (const json& r : runs) planned[r["name"].get<std::string>()] = r;
  std::set<std::string> kept;
  if (previous.is_object()) {
    LLM_REQUIRE(previous.value("config", std::string()) == manifest["config"], origin,
                ": the base config is now '", manifest["config"].get<std::string>(),
                "', the study directory's manifest was planned with '",
                previous.value("config", std::string()), "' (plan into a new directory)");
    // The sweeps widened and the finals chosen so far minimised the objective planned before.
    const json prev_objective = previous.value("objective", json("val_loss"));
    const json prev_target = previous.value("target_loss", json());
    LLM_REQUIRE(prev_objective == manifest["objective"] && prev_target == manifest["target_loss"],
                origin, ": objective ", manifest["objective"].dump(), " target_loss ",
                manifest["target_loss"].dump(), " differ from the study directory's (",
                prev_objective.dump(), ", ", prev_target.dump(),
                "): its sweeps and finals were chosen by those (plan into a new directory)");
    for (const json& r : previous["runs"]) {
      const std::string name = r["name"];
      if (planned.count(name))
        LLM_REQUIRE(
            planned[name]["overrides"] == r["overrides"] && planned[name]["world"] == r["world"],
            origin, ": run '", name,
            "' is planned with other settings than before (plan into a new directory, "
            "or keep its settings)");
      merged.push_back(r);
      kept.insert(name);
    }
    for (const auto& [scope, s] : previous["sweeps"].items())
      if (!sweeps.contains(scope)) sweeps[scope] = s;
    // The Slurm jobs submitted so far (study_slurm.h): without them a widened sweep or a plan
    // made again would forget which runs are queued, and the next submission would queue them
    // twice.
    if (previous.contains("slurm")) manifest["slurm"] = previous["slurm"];
  }
  for (const json& r : runs)
    if (!kept.count(r["name"].get<std::string>())) merged.push_back(r);
  manifest["sweeps"] = sweeps;
  manifest["runs"] = merged;
  check_baseline(manifest, origin);
  return manifest;
}

json study_manifest_read(const std::string& dir) {
  const std::string path = dir + "/manifest.json";
  std::ifstream in(path);
  LLM_REQUIRE(in, "study '", dir,
              "': no manifest.json (plan it first: ledgerlm study plan "
              "STUDY.toml --out ",
              dir, ")");
  json m;
  try {
    m = json::parse(in);
  } catch (const json::exception& e) {
    fail(error_message(path, ": not JSON (", e.what(), ")"));
  }
  LLM_REQUIRE(
      m.is_object() && m.value("format", 0) == 1 && m.contains("runs") && m["runs"].is_array(),
      path, ": not a study manifest (format 1 with runs)");
  // Each name becomes a path (runs/NAME, runs/NAME.log) and a command-line value: a manifest
  // edited by hand or by another tool is checked before anything is written.
  std::set<std::string> seen;
  for (size_t i = 0; i < m["runs"].size(); ++i) {
    const json& r = m["runs"][i];
    const std::string where = error_message(path, ": runs[", i, "]");
    LLM_REQUIRE(r.is_object() && r.contains("name") && r["name"].is_string(), where,
                ": expected an object with a string \"name\"");
    const std::string name = r["name"];
    study_check_run_name(name, where);
    LLM_REQUIRE(seen.insert(name).second, where, ": run name '", name, "' appears twice");
    LLM_REQUIRE(r.contains("overrides") && r["overrides"].is_object(), where, " ('", name,
                "'): expected an object \"overrides\"");
  }
  return m;
}

void study_check_run_name(const std::string& name, const std::string& where) {
  LLM_REQUIRE(!name.empty(), where, ": empty run name (expected letters, digits, '.', '-', '_')");
  LLM_REQUIRE(name != "." && name != ".." && name.find("..") == std::string::npos, where,
              ": run name '", name, "' holds '..' (a run directory must stay inside runs/)");
  LLM_REQUIRE(name.find('/') == std::string::npos && name.find('\\') == std::string::npos, where,
              ": run name '", name, "' holds a path separator (expected one file name)");
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    LLM_REQUIRE(c >= 0x20 && c != 0x7f, where, ": run name holds control character ",
                static_cast<int>(c), " (expected letters, digits, '.', '-', '_')");
  }
  LLM_REQUIRE(name[0] != '-', where, ": run name '", name,
              "' starts with '-' (it would read as an option of `ledgerlm train`)");
}

void study_manifest_write(const std::string& dir, const json& manifest) {
  fs::create_directories(dir);
  write_file_atomic(dir + "/manifest.json", manifest.dump(2) + "\n");
}

}  // namespace ledgerlm
