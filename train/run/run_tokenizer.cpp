// A run's copy of its tokenizer (see run_tokenizer.h).
#include "train/run/run_tokenizer.h"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "data/meta.h"
#include "model/base/check.h"

namespace ledgerlm {

namespace fs = std::filesystem;

void run_tokenizer_save(const std::string& run_dir, const std::string& data_dir) {
  const fs::path dest = fs::path(run_dir) / "tokenizer";
  const fs::path tmp = fs::path(run_dir) / ("tokenizer.tmp" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  LLM_REQUIRE(!ec, "cannot create '", tmp.string(), "': ", ec.message());
  try {
    // The files tokenizer_load() reads, copied as they are: the run's tokenizer_id (a hash of
    // them) then names the copy too.
    const DataMeta meta = meta_read(data_dir);
    std::vector<std::string> files = {"meta.json"};
    if (meta.tokenizer == "bpe") files.push_back("tokenizer.model");
    if (meta.tokenizer == "hf-bpe") {
      for (const char* f : {"tokenizer.json", "vocab.json", "merges.txt"})
        if (fs::exists(fs::path(data_dir) / f)) files.push_back(f);
    }
    for (const std::string& f : files) {
      fs::copy_file(fs::path(data_dir) / f, tmp / f, ec);
      LLM_REQUIRE(!ec, "cannot copy the tokenizer file '", (fs::path(data_dir) / f).string(),
                  "' into the run directory '", run_dir, "': ", ec.message());
    }
    fs::remove_all(dest, ec);
    LLM_REQUIRE(!ec, "cannot replace '", dest.string(), "': ", ec.message());
    fs::rename(tmp, dest, ec);
    LLM_REQUIRE(!ec, "cannot rename '", tmp.string(), "' to '", dest.string(), "': ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }
}

std::string run_tokenizer_dir(const std::string& run_dir) {
  const fs::path dir = fs::path(run_dir) / "tokenizer";
  std::error_code ec;
  return fs::is_regular_file(dir / "meta.json", ec) ? dir.string() : std::string();
}

}  // namespace ledgerlm
