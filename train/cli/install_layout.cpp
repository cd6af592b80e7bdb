// Files beside the ledgerlm binary (see install_layout.h).
#include "train/cli/install_layout.h"

#include <filesystem>

namespace ledgerlm {

namespace fs = std::filesystem;

std::string self_exe() {
  std::error_code ec;
  std::string p = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) return "ledgerlm";
  const std::string deleted = " (deleted)";
  if (p.size() > deleted.size() &&
      p.compare(p.size() - deleted.size(), deleted.size(), deleted) == 0)
    p.resize(p.size() - deleted.size());
  return p;
}

std::vector<std::string> install_candidates(const std::string& rel) {
  const fs::path exe_dir = fs::path(self_exe()).parent_path();
  std::vector<std::string> out;
  for (const fs::path& p :
       {exe_dir / "../share/ledgerlm" / rel, exe_dir / ".." / rel, exe_dir / rel})
    out.push_back(p.lexically_normal().string());
  return out;
}

std::string install_find(const std::string& rel) {
  std::error_code ec;
  for (const std::string& p : install_candidates(rel))
    if (fs::is_regular_file(p, ec)) return p;
  return "";
}

}  // namespace ledgerlm
