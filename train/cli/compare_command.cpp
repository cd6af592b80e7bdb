// `ledgerlm compare RUN_DIR ...`: the runs' summaries side by side (from each run's
// summary.json) and the config keys whose values differ between them (from each run's
// config.toml, read by the same loader as resume, so a default a file left out still counts).
// `--json` prints the same as one JSON object for scripts; `--tsv` one row per run (the keys that
// differ, then the summary's figures), for a spreadsheet or pandas.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/base/check.h"
#include "train/cli/commands.h"
#include "train/config/config_keys.h"
#include "train/run/metrics.h"
#include "train/run/run_dir.h"
#include "train/run/run_summary.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Keys that name a run rather than configure it: they differ between any two runs.
bool names_the_run(const std::string& key) {
  return key == "train.name" || key == "train.out_dir" || key == "train.overwrite";
}

struct ComparedRun {
  std::string dir, label;
  json summary;                               // null: no summary.json
  std::map<std::string, std::string> config;  // "section.key" -> value as a person reads it
};

std::map<std::string, std::string> config_display(const std::string& run_dir) {
  RunConfig cfg = run_load_config(run_dir);
  std::map<std::string, std::string> out;
  for (const ConfigKey& k : config_keys(cfg)) out[k.full()] = config_display_text(k);
  return out;
}

// The keys whose values are not the same in every run, in registry (alphabetical) order.
std::vector<std::string> differing_keys(const std::vector<ComparedRun>& runs) {
  std::vector<std::string> out;
  for (const auto& [key, value] : runs.front().config) {
    if (names_the_run(key)) continue;
    for (const ComparedRun& r : runs)
      if (r.config.at(key) != value) {
        out.push_back(key);
        break;
      }
  }
  return out;
}

std::string num(const json& v, const char* fmt) {
  if (!v.is_number()) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v.get<double>());
  return buf;
}

std::string bytes_mb(const json& v) {
  return v.is_number() ? num(v.get<double>() / 1e6, "%.2f MB") : "-";
}

std::string status_text(const json& s) {
  if (s.is_null()) return "no summary.json (running, or killed)";
  std::string t = s.value("status", "?");
  if (s.contains("stopped") && s["stopped"].is_string())
    t += " (" + s["stopped"].get<std::string>() + ")";
  if (s.contains("failed") && s["failed"].is_string()) t += ": " + s["failed"].get<std::string>();
  return t;
}

// Rows of the side-by-side table: (label, value per run).
std::vector<std::pair<std::string, std::vector<std::string>>> summary_rows(
    const std::vector<ComparedRun>& runs) {
  using Cell = std::string (*)(const json&);
  const std::vector<std::pair<const char*, Cell>> fields = {
      {"status", [](const json& s) { return status_text(s); }},
      {"steps", [](const json& s) { return num(s.value("steps", json()), "%.0f"); }},
      {"tokens", [](const json& s) { return num(s.value("tokens", json()), "%.0f"); }},
      {"global batch (seqs)",
       [](const json& s) { return num(s.value("global_batch", json()), "%.0f"); }},
      {"train s", [](const json& s) { return num(s.value("train_s", json()), "%.1f"); }},
      {"tokens/s", [](const json& s) { return num(s.value("mean_tokens_per_s", json()), "%.0f"); }},
      {"optim ms", [](const json& s) { return num(s.value("mean_optim_ms", json()), "%.2f"); }},
      {"final loss", [](const json& s) { return num(s.value("final_loss", json()), "%.4f"); }},
      {"final val loss",
       [](const json& s) { return num(s.value("final_val_loss", json()), "%.4f"); }},
      {"best val loss",
       [](const json& s) { return num(s.value("best_val_loss", json()), "%.4f"); }},
      {"best val bpb", [](const json& s) { return num(s.value("best_val_bpb", json()), "%.4f"); }},
      {"params", [](const json& s) { return num(s.value("params", json()), "%.0f"); }},
      {"peak tracked memory",
       [](const json& s) {
         return s.contains("mem") && s["mem"].contains("total")
                    ? bytes_mb(s["mem"]["total"].value("peak", json()))
                    : std::string("-");
       }},
      {"checkpoint",
       [](const json& s) {
         const json c = s.value("ckpt", json());
         return c.is_string() ? c.get<std::string>() : std::string("-");
       }},
      {"checkpoint size", [](const json& s) { return bytes_mb(s.value("ckpt_bytes", json())); }},
      {"config sha256", [](const json& s) {
         const json h = s.value("config_sha256", json());
         return h.is_string() ? h.get<std::string>().substr(0, 16) : std::string("-");
       }}};
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  for (const auto& [label, cell] : fields) {
    std::vector<std::string> values;
    for (const ComparedRun& r : runs)
      values.push_back(r.summary.is_null() && std::string(label) != "status" ? "-"
                                                                             : cell(r.summary));
    rows.emplace_back(label, values);
  }
  return rows;
}

void print_table(const std::vector<std::string>& header,
                 const std::vector<std::pair<std::string, std::vector<std::string>>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& [label, values] : rows) {
    width[0] = std::max(width[0], label.size());
    for (size_t c = 0; c < values.size(); ++c)
      width[c + 1] = std::max(width[c + 1], values[c].size());
  }
  auto line = [&](const std::string& first, const std::vector<std::string>& rest) {
    std::string text = first + std::string(width[0] - first.size(), ' ');
    for (size_t c = 0; c < rest.size(); ++c)
      text += "  " + rest[c] + std::string(width[c + 1] - rest[c].size(), ' ');
    while (!text.empty() && text.back() == ' ') text.pop_back();  // no padding after the last
    std::printf("%s\n", text.c_str());
  };
  line(header[0], std::vector<std::string>(header.begin() + 1, header.end()));
  for (const auto& [label, values] : rows) line(label, values);
}

// Column labels: the run directories' names, or the paths as given where two names collide.
void set_labels(std::vector<ComparedRun>* runs) {
  std::map<std::string, int> seen;
  for (ComparedRun& r : *runs) ++seen[fs::path(r.dir).lexically_normal().filename().string()];
  for (ComparedRun& r : *runs) {
    const std::string name = fs::path(r.dir).lexically_normal().filename().string();
    r.label = seen[name] > 1 || name.empty() ? r.dir : name;
  }
}

// A TSV cell: tabs and line breaks would split the row, so they become spaces; a missing value is
// empty.
std::string tsv_cell(std::string text) {
  for (char& c : text)
    if (c == '\t' || c == '\n' || c == '\r') c = ' ';
  return text;
}

std::string summary_cell(const json& summary, const char* field) {
  if (!summary.is_object() || !summary.contains(field) || summary[field].is_null()) return "";
  const json& v = summary[field];
  return tsv_cell(v.is_string() ? v.get<std::string>() : v.dump());
}

void print_tsv(const std::vector<ComparedRun>& runs, const std::vector<std::string>& differ) {
  static const char* const kFields[] = {"status",        "steps",        "tokens",
                                        "global_batch",  "train_s",      "mean_tokens_per_s",
                                        "mean_optim_ms", "final_loss",   "final_val_loss",
                                        "best_val_loss", "best_val_bpb", "params"};
  std::vector<std::string> cells = {"run", "dir"};
  cells.insert(cells.end(), differ.begin(), differ.end());
  cells.insert(cells.end(), std::begin(kFields), std::end(kFields));
  auto print_row = [](const std::vector<std::string>& row) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line.push_back('\t');
      line.append(row[i]);
    }
    std::printf("%s\n", line.c_str());
  };
  print_row(cells);
  for (const ComparedRun& r : runs) {
    cells = {tsv_cell(r.label), tsv_cell(r.dir)};
    for (const std::string& key : differ) cells.push_back(tsv_cell(r.config.at(key)));
    for (const char* f : kFields)
      cells.push_back(std::string(f) == "status" && r.summary.is_null()
                          ? std::string("no summary")
                          : summary_cell(r.summary, f));
    print_row(cells);
  }
}

}  // namespace

int command_compare(const CompareCommand& cmd) {
  std::vector<ComparedRun> runs;
  for (std::string dir : cmd.run_dirs) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    ComparedRun r;
    r.dir = dir;
    r.config = config_display(dir);
    r.summary = run_summary_read(dir);
    runs.push_back(std::move(r));
  }
  set_labels(&runs);
  const std::vector<std::string> differ = differing_keys(runs);
  LLM_REQUIRE(!(cmd.json && cmd.tsv), "compare: --json and --tsv: expected one of them");
  if (cmd.tsv) {
    print_tsv(runs, differ);
    return 0;
  }
  if (cmd.json) {
    json out = {{"runs", json::array()}, {"config_differs", json::object()}};
    for (const ComparedRun& r : runs)
      out["runs"].push_back({{"dir", r.dir}, {"label", r.label}, {"summary", r.summary}});
    for (const std::string& key : differ) {
      json values = json::array();
      for (const ComparedRun& r : runs) values.push_back(r.config.at(key));
      out["config_differs"][key] = values;
    }
    std::printf("%s\n", out.dump(2, ' ', false, json::error_handler_t::replace).c_str());
    return 0;
  }
  std::vector<std::string> header = {"run"};
  for (const ComparedRun& r : runs) header.push_back(r.label);
  print_table(header, summary_rows(runs));
  std::printf("\n");
  if (differ.empty()) {
    std::printf("config: no key differs (train.name, train.out_dir, train.overwrite left out)\n");
    return 0;
  }
  std::printf("config: %zu key(s) differ (train.name, train.out_dir, train.overwrite left out)\n",
              differ.size());
  std::vector<std::pair<std::string, std::vector<std::string>>> rows;
  for (const std::string& key : differ) {
    std::vector<std::string> values;
    for (const ComparedRun& r : runs) values.push_back(r.config.at(key));
    rows.emplace_back(key, values);
  }
  header[0] = "key";
  print_table(header, rows);
  return 0;
}

}  // namespace ledgerlm
