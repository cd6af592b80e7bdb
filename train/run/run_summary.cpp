// Run summaries (see run_summary.h).
#include "train/run/run_summary.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "ckpt/checkpoint.h"
#include "data/sha256.h"
#include "model/base/check.h"
#include "model/base/input_file.h"
#include "train/run/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

std::string read_whole(const std::string& path) {
  const int fd = input_file_open(path, "run file");
  LLM_REQUIRE(fd >= 0, "cannot read '", path, "' (", errno_text(), ")");
  return input_file_read_fd(fd, path, "run file");
}

int64_t dir_bytes(const fs::path& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec))
    if (e.is_regular_file(ec)) bytes += static_cast<int64_t>(e.file_size(ec));
  return bytes;
}

}  // namespace

std::string run_config_sha256(const std::string& run_dir) {
  return sha256_hex(read_whole(run_dir + "/config.toml"));
}

void run_summary_add_files(const std::string& run_dir, nlohmann::json* summary) {
  nlohmann::json& s = *summary;
  s["config_sha256"] = run_config_sha256(run_dir);
  const std::string root = run_dir + "/ckpt";
  std::error_code ec;
  const std::string latest = fs::is_directory(root, ec) ? checkpoint_latest(root) : "";
  s["ckpt"] =
      latest.empty() ? nlohmann::json() : nlohmann::json(fs::path(latest).filename().string());
  s["ckpt_bytes"] = latest.empty() ? 0 : dir_bytes(latest);
  const fs::path weights = fs::path(run_dir) / "model.safetensors";
  s["weights_bytes"] =
      fs::exists(weights, ec) ? static_cast<int64_t>(fs::file_size(weights, ec)) : 0;
}

void run_summary_write(const std::string& run_dir, const nlohmann::json& summary) {
  write_file_atomic(run_dir + "/summary.json",
                    summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

nlohmann::json run_summary_read(const std::string& run_dir) {
  const std::string path = run_dir + "/summary.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return nullptr;
  const nlohmann::json s = nlohmann::json::parse(read_whole(path), nullptr, false);
  LLM_REQUIRE(s.is_object() && s.contains("summary") && s["summary"] == true, "'", path,
              "' is not a ledgerlm run summary (expected a JSON object with \"summary\": true)");
  return s;
}

bool run_summary_finished_at(const std::string& run_dir, int64_t step) {
  nlohmann::json s;
  try {
    s = run_summary_read(run_dir);
  } catch (const Error&) {
    return false;  // a damaged summary is written again by the job that completes the run
  }
  std::error_code ec;
  return s.is_object() && s.value("status", std::string()) == "finished" && s.contains("steps") &&
         s["steps"].is_number_integer() && s["steps"].get<int64_t>() == step &&
         fs::is_regular_file(fs::path(run_dir) / "model.safetensors", ec);
}

void run_summary_remove(const std::string& run_dir) {
  std::error_code ec;
  fs::remove(run_dir + "/summary.json", ec);
  LLM_REQUIRE(!ec, "cannot remove '", run_dir, "/summary.json': ", ec.message());
}

}  // namespace ledgerlm
