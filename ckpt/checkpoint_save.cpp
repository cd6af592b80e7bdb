// Atomic checkpoint saves: temporary directory, fsync, rename, `latest`, keep-last-K
// (see checkpoint.h).
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_crc.h"
#include "ckpt/checkpoint_layout.h"
#include "model/base/check.h"

namespace ledgerlm {

namespace fs = std::filesystem;

namespace {

void stage(const CkptSaveOptions& o, const char* name) {
  if (o.on_stage) o.on_stage(name);
}

// Writes `text` to `path` and fsyncs it (inside the temporary directory: no rename needed).
void write_text_synced(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot create '", path, "'");
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      ::close(fd);
      fail("cannot write '" + path + "'");
    }
    done += static_cast<size_t>(n);
  }
  const int rc = ::fsync(fd);
  ::close(fd);
  LLM_REQUIRE(rc == 0, "cannot fsync '", path, "'");
}

// Removes leftovers of saves that were interrupted (crash, kill) before their rename.
void remove_stale_temporaries(const fs::path& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp_step_", 0) == 0 || name.rfind(".old_step_", 0) == 0)
      fs::remove_all(e.path(), ec);
  }
}

// Deletes the oldest complete checkpoints beyond `keep`, never the one just written.
void prune(const fs::path& root, int64_t keep, const std::string& newest) {
  auto all = checkpoint_list(root.string());
  const int64_t excess = static_cast<int64_t>(all.size()) - keep;
  for (int64_t i = 0; i < excess; ++i) {
    if (all[static_cast<size_t>(i)].second == newest) continue;
    std::error_code ec;
    fs::remove_all(all[static_cast<size_t>(i)].second, ec);
  }
}

}  // namespace

CkptSaveResult checkpoint_save(const std::string& root_dir, int64_t step,
                               const nlohmann::json& meta, const std::vector<CkptPiece>& pieces,
                               const CkptSaveOptions& options) {
  LLM_ASSERT(meta.is_object(), "checkpoint meta must be a JSON object");
  LLM_REQUIRE(options.world == 1, "checkpoint_save: several ranks are not supported yet");
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path root(root_dir);
  std::error_code ec;
  fs::create_directories(root, ec);
  LLM_REQUIRE(!ec, "cannot create checkpoint directory '", root.string(), "': ", ec.message());
  remove_stale_temporaries(root);

  const std::string final_name = checkpoint_dir_name(step);
  const fs::path tmp =
      root / (".tmp_" + final_name + "_" + std::to_string(static_cast<long long>(::getpid())));
  fs::create_directories(tmp, ec);
  LLM_REQUIRE(!ec, "cannot create '", tmp.string(), "': ", ec.message());

  CkptSaveResult result;
  stage(options, "tensors");
  nlohmann::json files = nlohmann::json::object();
  for (const CkptFileLayout& layout : ckpt_layouts_build(pieces)) {
    const std::string fname = layout.stem + ".safetensors";
    const std::string path = (tmp / fname).string();
    ckpt_file_create(path, layout);  // rank 0 under sharding, then a barrier
    int fd = ::open(path.c_str(), O_WRONLY);
    LLM_REQUIRE(fd >= 0, "cannot open checkpoint file '", path, "'");
    nlohmann::json tensors = nlohmann::json::object();
    try {
      for (const CkptTensorSlot& t : layout.tensors)
        tensors[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)},
                           {"shape", t.shape},
                           {"pieces", nlohmann::json::array()}};
      for (const CkptPiece& p : pieces) {
        if (p.file != layout.stem) continue;
        const uint32_t crc = ckpt_file_write_piece(fd, path, layout, p);
        tensors[p.name]["pieces"].push_back({{"rank", options.rank},
                                             {"begin", p.begin},
                                             {"count", p.count},
                                             {"crc", ckpt_crc_text(crc)}});
        result.data_bytes += p.count * static_cast<int64_t>(dtype_size(p.dtype));
      }
      LLM_REQUIRE(::fsync(fd) == 0, "cannot fsync '", path, "'");
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    files[fname] = {{"bytes", layout.total_bytes}, {"tensors", tensors}};
    result.bytes += layout.total_bytes;
  }

  stage(options, "meta");
  nlohmann::json full = meta;
  full["format"] = kCheckpointFormat;
  full["format_version"] = kCheckpointFormatVersion;
  full["step"] = step;
  full["world_size"] = options.world;
  full["files"] = files;
  full["complete"] = true;
  const std::string text = full.dump(1) + "\n";
  write_text_synced((tmp / "meta.json").string(), text);
  result.bytes += static_cast<int64_t>(text.size());
  ckpt_fsync_path(tmp.string(), true);

  stage(options, "rename");
  const fs::path final_dir = root / final_name;
  fs::path displaced;
  if (fs::exists(final_dir)) {  // the same step saved again: move the old one aside first
    displaced = root / (".old_" + final_name);
    fs::remove_all(displaced, ec);
    fs::rename(final_dir, displaced, ec);
    LLM_REQUIRE(!ec, "cannot move '", final_dir.string(), "' aside: ", ec.message());
  }
  fs::rename(tmp, final_dir, ec);
  LLM_REQUIRE(!ec, "cannot rename '", tmp.string(), "' to '", final_dir.string(),
              "': ", ec.message());
  ckpt_fsync_path(root.string(), true);

  stage(options, "latest");
  const std::string pointer = (root / "latest").string();
  write_text_synced(pointer + ".tmp", final_name + "\n");
  LLM_REQUIRE(std::rename((pointer + ".tmp").c_str(), pointer.c_str()) == 0, "cannot rename '",
              pointer, ".tmp' to '", pointer, "'");
  ckpt_fsync_path(root.string(), true);
  if (!displaced.empty()) fs::remove_all(displaced, ec);

  stage(options, "prune");
  prune(root, options.keep, final_dir.string());
  result.dir = final_dir.string();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace ledgerlm
