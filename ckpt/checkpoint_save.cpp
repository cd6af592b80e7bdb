// Atomic checkpoint saves: temporary directory, fsync, rename, `latest`, keep-last-K; a save
// that fails removes everything it created; every rank of a sharded job writes its own pieces
// into the shared files (see checkpoint.h).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "ckpt/checkpoint.h"
#include "ckpt/checkpoint_layout.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"

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
  bool made_tmp = false;   // this process created tmp (rank 0)
  bool published = false;  // tmp renamed to final_dir
  bool committed = false;  // `latest` names final_dir: the save can no longer be undone
};

// The ranks of one save: every rank's text on every rank (just this rank's with one).
struct SaveGroup {
  const CkptSaveOptions& o;
  std::vector<std::string> gather(const std::string& mine) const {
    if (o.world == 1 || !o.all_gather_text) return {mine};
    return o.all_gather_text(mine);
  }
  // Runs `fn` (a phase of the save that may fail on some ranks); afterwards every rank knows
  // whether any failed and throws the first failure, so no rank goes on alone.
  void agree(const std::function<void()>& fn) const {
    std::string failure;
    try {
      fn();
    } catch (const JobError&) {
      throw;  // a rank is gone: the others cannot agree with it
    } catch (const Error& e) {
      failure = e.what();
      if (failure.empty()) failure = "checkpoint save failed";
    }
    const std::vector<std::string> all = gather(failure);
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) fail(o.world == 1 ? all[r] : error_message("rank ", r, ": ", all[r]));
  }
};

// Piece descriptors without data, so every rank can lay out the files from all ranks' pieces.
std::string describe(const std::vector<CkptPiece>& pieces) {
  nlohmann::json list = nlohmann::json::array();
  for (const CkptPiece& p : pieces)
    list.push_back({p.file, p.name, dtype_safetensors_name(p.dtype), p.shape, p.begin, p.count});
  return list.dump();
}

std::vector<CkptPiece> pieces_of_every_rank(const SaveGroup& group,
                                            const std::vector<CkptPiece>& mine) {
  if (group.o.world == 1) return mine;
  std::vector<CkptPiece> all;
  for (const std::string& text : group.gather(describe(mine))) {
    for (const nlohmann::json& d : nlohmann::json::parse(text)) {
      CkptPiece p;
      p.file = d[0].get<std::string>();
      p.name = d[1].get<std::string>();
      LLM_ASSERT(dtype_parse_safetensors(d[2].get<std::string>(), &p.dtype), "piece dtype");
      p.shape = d[3].get<std::vector<int64_t>>();
      p.begin = d[4].get<int64_t>();
      p.count = d[5].get<int64_t>();
      all.push_back(std::move(p));
    }
  }
  return all;
}

// Rank 0: the temporary directory and every data file at its full size.
void create_files(SaveDirs* dirs, const std::vector<CkptFileLayout>& layouts) {
  std::error_code ec;
  fs::remove_all(dirs->tmp, ec);  // this process's own leftover, if any
  fs::create_directories(dirs->tmp, ec);
  LLM_REQUIRE(!ec, "cannot create '", dirs->tmp.string(), "': ", ec.message());
  dirs->made_tmp = true;
  for (const CkptFileLayout& layout : layouts)
    ckpt_file_create((dirs->tmp / (layout.stem + ".safetensors")).string(), layout);
}

// This rank's pieces written into the (existing) files; returns {file: {tensor: [records]}}.
nlohmann::json write_pieces(const fs::path& tmp, const std::vector<CkptFileLayout>& layouts,
                            const std::vector<CkptPiece>& pieces, int rank, int64_t chunk_bytes,
                            int64_t* data_bytes) {
  nlohmann::json records = nlohmann::json::object();
  for (const CkptFileLayout& layout : layouts) {
    const std::string fname = layout.stem + ".safetensors";
    const std::string path = (tmp / fname).string();
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    LLM_REQUIRE(fd >= 0, "cannot open checkpoint file '", path, "': ", std::strerror(errno));
    try {
      for (const CkptPiece& p : pieces) {
        if (p.file != layout.stem) continue;
        const uint32_t crc = ckpt_file_write_piece(fd, path, layout, p, chunk_bytes);
        records[fname][p.name].push_back(
            {{"rank", rank}, {"begin", p.begin}, {"count", p.count}, {"crc", crc32c_text(crc)}});
        *data_bytes += p.count * static_cast<int64_t>(dtype_size(p.dtype));
      }
      LLM_REQUIRE(::fsync(fd) == 0, "cannot fsync '", path, "': ", std::strerror(errno));
    } catch (...) {
      ::close(fd);
      throw;
    }
    LLM_REQUIRE(::close(fd) == 0, "cannot write checkpoint file '", path,
                "': ", std::strerror(errno));
  }
  return records;
}

// meta.json's "files": every tensor with the records of every rank, in rank order.
nlohmann::json files_record(const std::vector<CkptFileLayout>& layouts,
                            const std::vector<std::string>& records_by_rank, int64_t* bytes) {
  nlohmann::json files = nlohmann::json::object();
  for (const CkptFileLayout& layout : layouts) {
    const std::string fname = layout.stem + ".safetensors";
    nlohmann::json tensors = nlohmann::json::object();
    for (const CkptTensorSlot& t : layout.tensors)
      tensors[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)},
                         {"shape", t.shape},
                         {"pieces", nlohmann::json::array()}};
    for (const std::string& text : records_by_rank) {
      const nlohmann::json rec = nlohmann::json::parse(text);
      if (!rec.contains(fname)) continue;
      for (const auto& [name, list] : rec[fname].items())
        for (const nlohmann::json& r : list) tensors[name]["pieces"].push_back(r);
    }
    files[fname] = {{"bytes", layout.total_bytes}, {"tensors", tensors}};
    *bytes += layout.total_bytes;
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
  if (dirs.made_tmp) fs::remove_all(dirs.tmp, ec);
  fs::remove(dirs.root / "latest.tmp", ec);
  if (dirs.published) fs::remove_all(dirs.final_dir, ec);
  if (!dirs.displaced.empty()) fs::rename(dirs.displaced, dirs.final_dir, ec);
}

}  // namespace

CkptSaveResult checkpoint_save(const std::string& root_dir, int64_t step,
                               const nlohmann::json& meta, const std::vector<CkptPiece>& pieces,
                               const CkptSaveOptions& options) {
  LLM_ASSERT(meta.is_object(), "checkpoint meta must be a JSON object");
  LLM_ASSERT(options.world == 1 || options.all_gather_text, "several ranks need a collective");
  static int saves = 0;  // this process's saves, for the test hook
  const int save_index = ++saves;
  const SaveGroup group{options};
  const bool lead = options.rank == 0;
  const auto t0 = std::chrono::steady_clock::now();
  SaveDirs dirs;
  dirs.root = root_dir;
  const std::string final_name = checkpoint_dir_name(step);
  dirs.final_dir = dirs.root / final_name;
  const std::vector<CkptFileLayout> layouts =
      ckpt_layouts_build(pieces_of_every_rank(group, pieces));
  CkptSaveResult result;
  try {
    // Rank 0 creates the temporary directory (named after its pid) and the files.
    std::string tmp_name;
    group.agree([&] {
      if (!lead) return;
      std::error_code ec;
      fs::create_directories(dirs.root, ec);
      LLM_REQUIRE(!ec, "cannot create checkpoint directory '", dirs.root.string(),
                  "': ", ec.message());
      tmp_name = ".tmp_" + final_name + "_" + std::to_string(::getpid());
      dirs.tmp = dirs.root / tmp_name;
      stage(options, "tensors", save_index);
      create_files(&dirs, layouts);
    });
    dirs.tmp = dirs.root / group.gather(tmp_name).front();
    // Every rank writes its pieces (several hosts: a filesystem they all see).
    std::string records;
    group.agree([&] {
      LLM_REQUIRE(fs::is_directory(dirs.tmp), "checkpoint directory '", dirs.tmp.string(),
                  "' is not visible on this rank (several hosts need train.out_dir on a shared "
                  "filesystem)");
      records = write_pieces(dirs.tmp, layouts, pieces, options.rank, options.stream_chunk_bytes,
                             &result.data_bytes)
                    .dump();
    });
    const std::vector<std::string> all_records = group.gather(records);
    int64_t all_data = 0;
    for (const std::string& d : group.gather(std::to_string(result.data_bytes)))
      all_data += std::stoll(d);
    result.data_bytes = all_data;
    const nlohmann::json files = files_record(layouts, all_records, &result.bytes);
    // Rank 0 completes it: meta.json with every rank's checksums, the rename, `latest`.
    group.agree([&] {
      if (!lead) return;
      stage(options, "meta", save_index);
      write_meta(dirs, meta, step, files, options, &result);
      stage(options, "rename", save_index);
      publish(&dirs);
      stage(options, "latest", save_index);
      point_latest(&dirs);
    });
  } catch (const JobError&) {
    if (lead) roll_back(dirs);
    throw;  // the job ends: not a failure every rank agrees on
  } catch (const Error& e) {
    if (lead) roll_back(dirs);
    if (dirs.committed) throw;
    // Every phase above ends in group.agree (or works on gathered data alike on every rank):
    // all ranks are here with the same failure.
    throw CkptSaveFailed(
        error_message("checkpoint ", dirs.final_dir.string(), " not saved: ", e.what(),
                      " (nothing of it was left behind; the previous checkpoints are intact)"));
  } catch (...) {
    if (lead) roll_back(dirs);
    throw;
  }
  // Committed: `latest` names the new checkpoint.
  std::string total = "0";
  if (lead) {
    std::error_code ec;
    if (!dirs.displaced.empty()) fs::remove_all(dirs.displaced, ec);
    stage(options, "prune", save_index);
    prune(dirs.root, options.keep, dirs.final_dir.string());
    total = std::to_string(result.bytes);
  }
  result.bytes = std::stoll(group.gather(total).front());
  result.dir = dirs.final_dir.string();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace ledgerlm
