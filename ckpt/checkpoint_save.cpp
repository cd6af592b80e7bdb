// Atomic checkpoint saves: temporary directory, fsync, rename, `latest`, keep-last-K; a save
// that fails removes everything it created (see checkpoint.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_crc.h"
#include "ckpt/checkpoint_layout.h"
#include "model/base/check.h"

namespace ledgerlm {

namespace fs = std::filesystem;

namespace {

// The test hook LEDGERLM_TEST_CKPT_KILL=STAGE[@N]: SIGKILL at STAGE of this process's N-th save.
void test_kill_hook(const char* stage_name, int save_index) {
  static const std::string spec = [] {
    const char* v = std::getenv("LEDGERLM_TEST_CKPT_KILL");
    return std::string(v ? v : "");
  }();
  if (spec.empty()) return;
  const size_t at = spec.find('@');
  const int nth = at == std::string::npos ? 1 : std::atoi(spec.c_str() + at + 1);
  if (spec.substr(0, at) == stage_name && nth == save_index) ::raise(SIGKILL);
}

void stage(const CkptSaveOptions& o, const char* name, int save_index) {
  test_kill_hook(name, save_index);
  if (o.on_stage) o.on_stage(name);
}

// Writes `text` to `path` and fsyncs it (inside the temporary directory: no rename needed).
void write_text_synced(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  LLM_REQUIRE(fd >= 0, "cannot create '", path, "': ", std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "short write";
      ::close(fd);
      fail(error_message("cannot write '", path, "': ", why));
    }
    done += static_cast<size_t>(n);
  }
  const bool synced = ::fsync(fd) == 0;
  const std::string why = std::strerror(errno);
  const bool closed = ::close(fd) == 0;
  LLM_REQUIRE(synced && closed, "cannot write '", path, "': ", synced ? std::strerror(errno) : why);
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

// The directories of one save: what it wrote, and how far it got.
struct SaveDirs {
  fs::path root, tmp, final_dir, displaced;
  bool published = false;  // tmp renamed to final_dir
  bool committed = false;  // `latest` names final_dir: the save can no longer be undone
};

// Writes the data files into dirs.tmp; returns meta.json's "files" record.
nlohmann::json write_data_files(const SaveDirs& dirs, const std::vector<CkptPiece>& pieces,
                                const CkptSaveOptions& options, CkptSaveResult* result) {
  nlohmann::json files = nlohmann::json::object();
  for (const CkptFileLayout& layout : ckpt_layouts_build(pieces)) {
    const std::string fname = layout.stem + ".safetensors";
    const std::string path = (dirs.tmp / fname).string();
    ckpt_file_create(path, layout);  // rank 0 under sharding, then a barrier
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    LLM_REQUIRE(fd >= 0, "cannot open checkpoint file '", path, "': ", std::strerror(errno));
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
        result->data_bytes += p.count * static_cast<int64_t>(dtype_size(p.dtype));
      }
      LLM_REQUIRE(::fsync(fd) == 0, "cannot fsync '", path, "': ", std::strerror(errno));
    } catch (...) {
      ::close(fd);
      throw;
    }
    LLM_REQUIRE(::close(fd) == 0, "cannot write checkpoint file '", path,
                "': ", std::strerror(errno));
    files[fname] = {{"bytes", layout.total_bytes}, {"tensors", tensors}};
    result->bytes += layout.total_bytes;
  }
  return files;
}

// meta.json last: its presence marks the directory complete. It carries its own checksum.
void write_meta(const SaveDirs& dirs, const nlohmann::json& meta, int64_t step,
                const nlohmann::json& files, const CkptSaveOptions& options,
                CkptSaveResult* result) {
  nlohmann::json full = meta;
  full["format"] = kCheckpointFormat;
  full["format_version"] = kCheckpointFormatVersion;
  full["step"] = step;
  full["world_size"] = options.world;
  full["files"] = files;
  full["complete"] = true;
  full[kCheckpointMetaChecksumKey] = checkpoint_meta_checksum(full);
  const std::string text = full.dump(1) + "\n";
  write_text_synced((dirs.tmp / "meta.json").string(), text);
  result->bytes += static_cast<int64_t>(text.size());
  ckpt_fsync_path(dirs.tmp.string(), true);
}

// Renames the temporary directory to step_N (a same-step checkpoint is moved aside first and
// removed only once `latest` is written).
void publish(SaveDirs* dirs) {
  std::error_code ec;
  if (fs::exists(dirs->final_dir)) {
    dirs->displaced = dirs->root / (".old_" + dirs->final_dir.filename().string());
    fs::remove_all(dirs->displaced, ec);
    fs::rename(dirs->final_dir, dirs->displaced, ec);
    LLM_REQUIRE(!ec, "cannot move '", dirs->final_dir.string(), "' aside: ", ec.message());
  }
  fs::rename(dirs->tmp, dirs->final_dir, ec);
  if (ec && !dirs->displaced.empty()) {
    std::error_code ignored;
    fs::rename(dirs->displaced, dirs->final_dir, ignored);
    dirs->displaced.clear();
  }
  LLM_REQUIRE(!ec, "cannot rename '", dirs->tmp.string(), "' to '", dirs->final_dir.string(),
              "': ", ec.message());
  dirs->published = true;
  ckpt_fsync_path(dirs->root.string(), true);
}

void point_latest(SaveDirs* dirs) {
  const std::string pointer = (dirs->root / "latest").string();
  write_text_synced(pointer + ".tmp", dirs->final_dir.filename().string() + "\n");
  if (std::rename((pointer + ".tmp").c_str(), pointer.c_str()) != 0)
    fail(error_message("cannot rename '", pointer, ".tmp' to '", pointer,
                       "': ", std::strerror(errno)));
  dirs->committed = true;
  ckpt_fsync_path(dirs->root.string(), true);
}

// Undoes a save that failed before `latest` named it: nothing it wrote stays behind (a full
// disk stays no fuller than before), and a same-step checkpoint it moved aside comes back.
void roll_back(const SaveDirs& dirs) noexcept {
  if (dirs.committed) return;
  std::error_code ec;
  fs::remove_all(dirs.tmp, ec);
  fs::remove(dirs.root / "latest.tmp", ec);
  if (dirs.published) fs::remove_all(dirs.final_dir, ec);
  if (!dirs.displaced.empty()) fs::rename(dirs.displaced, dirs.final_dir, ec);
}

}  // namespace

CkptSaveResult checkpoint_save(const std::string& root_dir, int64_t step,
                               const nlohmann::json& meta, const std::vector<CkptPiece>& pieces,
                               const CkptSaveOptions& options) {
  LLM_ASSERT(meta.is_object(), "checkpoint meta must be a JSON object");
  LLM_REQUIRE(options.world == 1, "checkpoint_save: several ranks are not supported yet");
  static int saves = 0;  // this process's saves, for the test hook
  const int save_index = ++saves;
  const auto t0 = std::chrono::steady_clock::now();
  SaveDirs dirs;
  dirs.root = root_dir;
  std::error_code ec;
  fs::create_directories(dirs.root, ec);
  LLM_REQUIRE(!ec, "cannot create checkpoint directory '", dirs.root.string(), "': ", ec.message());
  const std::string final_name = checkpoint_dir_name(step);
  dirs.final_dir = dirs.root / final_name;
  dirs.tmp = dirs.root / (".tmp_" + final_name + "_" + std::to_string(::getpid()));
  fs::remove_all(dirs.tmp, ec);  // this process's own leftover, if any
  fs::create_directories(dirs.tmp, ec);
  LLM_REQUIRE(!ec, "cannot create '", dirs.tmp.string(), "': ", ec.message());

  CkptSaveResult result;
  try {
    stage(options, "tensors", save_index);
    const nlohmann::json files = write_data_files(dirs, pieces, options, &result);
    stage(options, "meta", save_index);
    write_meta(dirs, meta, step, files, options, &result);
    stage(options, "rename", save_index);
    publish(&dirs);
    stage(options, "latest", save_index);
    point_latest(&dirs);
  } catch (const Error& e) {
    roll_back(dirs);
    if (dirs.committed) throw;
    fail(error_message("checkpoint ", dirs.final_dir.string(), " not saved: ", e.what(),
                       " (nothing of it was left behind; the previous checkpoints are intact)"));
  } catch (...) {
    roll_back(dirs);
    throw;
  }
  // Committed: `latest` names the new checkpoint.
  if (!dirs.displaced.empty()) fs::remove_all(dirs.displaced, ec);
  stage(options, "prune", save_index);
  prune(dirs.root, options.keep, dirs.final_dir.string());
  result.dir = dirs.final_dir.string();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace ledgerlm
