// Checkpoint directory naming, listing, the `latest` pointer and path resolution
// (see checkpoint.h).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {

namespace fs = std::filesystem;

std::string checkpoint_dir_name(int64_t step) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "step_%06lld", static_cast<long long>(step));
  return buf;
}

std::vector<std::pair<int64_t, std::string>> checkpoint_list(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0 || !e.is_directory()) continue;
    const std::string digits = name.substr(5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    if (!fs::exists(e.path() / "meta.json")) continue;  // never completed
    out.emplace_back(std::stoll(digits), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string checkpoint_latest(const std::string& root) {
  const fs::path pointer = fs::path(root) / "latest";
  if (!fs::exists(pointer)) {
    // `latest` is written after the directory rename: a crash in between leaves a complete
    // newest directory without a pointer to it, and that directory is good to use.
    auto all = checkpoint_list(root);
    return all.empty() ? std::string() : all.back().second;
  }
  const int fd = input_file_open(pointer.string(), "checkpoint pointer");
  LLM_REQUIRE(fd >= 0, "checkpoint pointer '", pointer.string(), "' cannot be read (", errno_text(),
              ")");
  std::istringstream f(input_file_read_fd(fd, pointer.string(), "checkpoint pointer"));
  std::string name;
  std::getline(f, name);
  LLM_REQUIRE(!name.empty() && name.find('/') == std::string::npos, "checkpoint pointer '",
              pointer.string(), "' is empty or malformed (expected a name like step_000123)");
  const fs::path dir = fs::path(root) / name;
  LLM_REQUIRE(fs::exists(dir / "meta.json"), "checkpoint pointer '", pointer.string(), "' names '",
              name, "', which is missing or incomplete");
  return dir.string();
}

std::string checkpoint_resolve(const std::string& path) {
  LLM_REQUIRE(fs::exists(path), "checkpoint '", path, "' does not exist");
  if (fs::exists(fs::path(path) / "meta.json")) return path;
  for (const fs::path& root : {fs::path(path), fs::path(path) / "ckpt"}) {
    if (!fs::is_directory(root)) continue;
    std::string latest = checkpoint_latest(root.string());
    if (!latest.empty()) return latest;
  }
  fail(error_message("'", path,
                     "' is not a checkpoint: expected a checkpoint directory (with meta.json), a "
                     "ckpt directory or a run directory with checkpoints"));
}

int checkpoint_remove_stale(const std::string& root) {
  int touched = 0;
  std::error_code ec;
  std::vector<fs::path> entries;
  for (const auto& e : fs::directory_iterator(root, ec)) entries.push_back(e.path());
  for (const fs::path& path : entries) {
    const std::string name = path.filename().string();
    if (name.rfind(".tmp_step_", 0) == 0 || name == "latest.tmp") {
      touched += fs::remove_all(path, ec) > 0 ? 1 : 0;
    } else if (name.rfind(".old_step_", 0) == 0) {
      // Killed between moving step_N aside and renaming the new step_N in: the old one is the
      // complete copy (and the one `latest` may name).
      const fs::path original = fs::path(root) / name.substr(5);
      if (!fs::exists(original, ec)) {
        fs::rename(path, original, ec);
      } else {
        fs::remove_all(path, ec);
      }
      ++touched;
    }
  }
  return touched;
}

}  // namespace ledgerlm
