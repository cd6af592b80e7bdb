// Run directory handling (see run_dir.h).
#include "train/run/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "data/data_check.h"
#include "model/base/check.h"
#include "train/config/config_file.h"
#include "train/config/config_keys.h"

namespace ledgerlm {

namespace fs = std::filesystem;

DataMeta run_resolve_data(RunConfig* config) {
  const DataCheck data = data_check(config->data.dir);
  // Stored absolute in config.toml, so eval/sample/resume work from any directory.
  config->data.dir = fs::absolute(config->data.dir).lexically_normal().string();
  while (config->data.dir.size() > 1 && config->data.dir.back() == '/') config->data.dir.pop_back();
  if (config->model.vocab_size == 0) {
    config->model.vocab_size = data.meta.vocab_size;
  } else if (config->model.vocab_size != data.meta.vocab_size) {
    // A model with more embedding rows than its tokenizer has ids (Qwen2.5 pads them) takes the
    // data of that tokenizer, shown by the tokenizer the run records (import --data records it
    // once it has compared the tokenizers): the extra rows are never a target.
    const bool padded = data.meta.vocab_size < config->model.vocab_size &&
                        !config->data.tokenizer_id.empty() &&
                        config->data.tokenizer_id == data.tokenizer_id;
    LLM_REQUIRE(padded, "model.vocab_size = ", config->model.vocab_size, " but the data in '",
                config->data.dir, "' has vocab size ", data.meta.vocab_size,
                " (set model.vocab_size = 0 to take the data's)");
  }
  if (config->data.tokenizer_id.empty()) {
    config->data.tokenizer_id = data.tokenizer_id;
  } else {
    LLM_REQUIRE(config->data.tokenizer_id == data.tokenizer_id,
                "data.tokenizer_id = ", config->data.tokenizer_id, " but the data in '",
                config->data.dir, "' has tokenizer ", data.tokenizer_id,
                " (the tokenizer was replaced; set data.tokenizer_id = \"\" for a new run on "
                "this data)");
  }
  return data.meta;
}

std::string run_dir_path(const RunConfig& config) {
  return (fs::path(config.train.out_dir) / config.train.name).string();
}

bool run_dir_check_reuse(const RunConfig& config, bool reuse) {
  const std::string dir = run_dir_path(config);
  std::error_code ec;
  if (!fs::exists(dir, ec)) return false;
  LLM_REQUIRE(reuse, "run directory '", dir,
              "' already exists: choose another --train.name, resume it with --resume auto, "
              "or pass --train.overwrite true");
  LLM_REQUIRE(fs::is_directory(dir, ec), "run directory '", dir, "' is not a directory");
  return true;
}

void run_dir_create(const std::string& run_dir) {
  std::error_code ec;
  const fs::path dir(run_dir);
  if (dir.has_parent_path()) fs::create_directories(dir.parent_path(), ec);
  LLM_REQUIRE(!ec, "cannot create '", dir.parent_path().string(), "': ", ec.message());
  const bool created = fs::create_directory(dir, ec);
  LLM_REQUIRE(!ec, "cannot create run directory '", run_dir, "': ", ec.message());
  LLM_REQUIRE(created, "run directory '", run_dir,
              "' appeared while this job was starting (another job on the same run?)");
}

namespace {

// The step a metrics record belongs to (-1 for a record without one).
int64_t record_step(const nlohmann::json& rec) {
  for (const char* key : {"step", "steps"})
    if (rec.contains(key) && rec[key].is_number_integer()) return rec[key].get<int64_t>();
  return -1;
}

}  // namespace

std::string shell_quote(const std::string& text) {
  static const std::string safe =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:=@%+,-";
  if (!text.empty() && text.find_first_not_of(safe) == std::string::npos) return text;
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

void run_write_config(const std::string& run_dir, const RunConfig& config,
                      const std::string& written_by) {
  RunConfig copy = config;
  write_file_atomic(run_dir + "/config.toml", "# resolved configuration of this run (written by " +
                                                  written_by + ")\n" +
                                                  config_to_toml(config_keys(copy)));
}

std::map<std::string, std::string> run_config_flat(const RunConfig& config) {
  RunConfig copy = config;
  std::map<std::string, std::string> out;
  for (const auto& k : config_keys(copy)) out[k.full()] = config_value_text(k);
  return out;
}

int64_t run_metrics_truncate(const std::string& run_dir, int64_t step) {
  const std::string path = run_dir + "/metrics.jsonl";
  if (!fs::exists(path)) return 0;
  std::ifstream in(path, std::ios::binary);
  LLM_REQUIRE(in, "cannot read '", path, "'");
  std::string line, kept;
  bool changed = false;
  int64_t broken = 0;
  while (std::getline(in, line)) {
    changed = changed || in.eof();  // the last line lacks its newline: cut mid-record
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
    if (!rec.is_object()) {
      ++broken;
      continue;
    }
    // A summary ends one job's part of the log; the resumed job writes the run's next one.
    if (record_step(rec) > step || rec.contains("summary")) {
      changed = true;
      continue;
    }
    kept += line + "\n";
  }
  LLM_REQUIRE(!in.bad(), "cannot read '", path, "'");
  if (changed || broken > 0) write_file_atomic(path, kept);
  return broken;
}

nlohmann::json run_metrics_at_step(const std::string& run_dir, int64_t step) {
  nlohmann::json merged = nlohmann::json::object();
  std::ifstream in(run_dir + "/metrics.jsonl", std::ios::binary);
  if (!in) return merged;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
    if (!rec.is_object() || rec.contains("summary") || record_step(rec) != step) continue;
    merged.update(rec);
  }
  return merged;
}

RunConfig run_load_config(const std::string& run_dir) {
  std::string path = run_dir + "/config.toml";
  LLM_REQUIRE(fs::exists(path), "run '", run_dir,
              "': no config.toml (is this a ledgerlm run directory?)");
  RunConfig config;
  config_load_file(path, config_keys(config));
  return config;
}

}  // namespace ledgerlm
