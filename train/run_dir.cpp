// Run directory handling (see run_dir.h).
#include "train/run_dir.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "model/base/check.h"
#include "train/config_file.h"
#include "train/config_keys.h"

namespace ledgerlm {

namespace fs = std::filesystem;

DataMeta run_resolve_data(RunConfig* config) {
  DataMeta meta = meta_read(config->data.dir);
  // Stored absolute in config.toml, so eval/sample/resume work from any directory.
  config->data.dir = fs::absolute(config->data.dir).lexically_normal().string();
  while (config->data.dir.size() > 1 && config->data.dir.back() == '/') config->data.dir.pop_back();
  if (config->model.vocab_size == 0) {
    config->model.vocab_size = meta.vocab_size;
  } else {
    LLM_REQUIRE(config->model.vocab_size == meta.vocab_size,
                "model.vocab_size = ", config->model.vocab_size, " but the data in '",
                config->data.dir, "' has vocab size ", meta.vocab_size,
                " (set model.vocab_size = 0 to take the data's)");
  }
  return meta;
}

std::string run_dir_prepare(const RunConfig& config, bool reuse) {
  fs::path dir = fs::path(config.train.out_dir) / config.train.name;
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    LLM_REQUIRE(reuse, "run directory '", dir.string(),
                "' already exists: choose another --train.name, resume it with --resume auto, "
                "or pass --train.overwrite true");
  }
  fs::create_directories(dir, ec);
  LLM_REQUIRE(!ec, "cannot create run directory '", dir.string(), "': ", ec.message());
  return dir.string();
}

void write_file_atomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot write '", tmp, "'");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("write to '" + tmp + "' failed");
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  LLM_REQUIRE(std::rename(tmp.c_str(), path.c_str()) == 0, "cannot rename '", tmp, "' to '", path,
              "'");
}

void run_write_config(const std::string& run_dir, const RunConfig& config) {
  RunConfig copy = config;
  write_file_atomic(run_dir + "/config.toml",
                    "# resolved configuration of this run (written by ledgerlm train)\n" +
                        config_to_toml(config_keys(copy)));
}

std::map<std::string, std::string> run_config_flat(const RunConfig& config) {
  RunConfig copy = config;
  std::map<std::string, std::string> out;
  for (const auto& k : config_keys(copy)) out[k.full()] = config_value_text(k);
  return out;
}

void run_metrics_truncate(const std::string& run_dir, int64_t step) {
  const std::string path = run_dir + "/metrics.jsonl";
  if (!fs::exists(path)) return;
  std::ifstream in(path, std::ios::binary);
  std::string line, kept;
  bool dropped = false;
  while (std::getline(in, line)) {
    nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
    if (rec.is_object()) {
      const int64_t at = rec.contains("step") && rec["step"].is_number_integer()
                             ? rec["step"].get<int64_t>()
                             : (rec.contains("steps") && rec["steps"].is_number_integer()
                                    ? rec["steps"].get<int64_t>()
                                    : -1);
      if (at > step) {
        dropped = true;
        continue;
      }
    }
    kept += line + "\n";
  }
  if (dropped) write_file_atomic(path, kept);
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
