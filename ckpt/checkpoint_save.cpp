// Atomic checkpoint saves: temporary directory, fsync, rename, `latest`, keep-last-K, with every
// rank of a sharded job writing its own pieces into the shared files (see checkpoint.h).
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
using nlohmann::json;

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
  json list = json::array();
  for (const CkptPiece& p : pieces)
    list.push_back({p.file, p.name, dtype_safetensors_name(p.dtype), p.shape, p.begin, p.count});
  return list.dump();
}

std::vector<CkptPiece> pieces_of_every_rank(const SaveGroup& group,
                                            const std::vector<CkptPiece>& mine) {
  if (group.o.world == 1) return mine;
  std::vector<CkptPiece> all;
  for (const std::string& text : group.gather(describe(mine))) {
    for (const json& d : json::parse(text)) {
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

// This rank's pieces written into the (existing) files; returns {file: {tensor: [records]}}.
json write_pieces(const fs::path& tmp, const std::vector<CkptFileLayout>& layouts,
                  const std::vector<CkptPiece>& pieces, int rank, int64_t* data_bytes) {
  json records = json::object();
  for (const CkptFileLayout& layout : layouts) {
    const std::string fname = layout.stem + ".safetensors";
    const std::string path = (tmp / fname).string();
    int fd = ::open(path.c_str(), O_WRONLY);
    LLM_REQUIRE(fd >= 0, "cannot open checkpoint file '", path, "'");
    try {
      for (const CkptPiece& p : pieces) {
        if (p.file != layout.stem) continue;
        const uint32_t crc = ckpt_file_write_piece(fd, path, layout, p);
        records[fname][p.name].push_back(
            {{"rank", rank}, {"begin", p.begin}, {"count", p.count}, {"crc", ckpt_crc_text(crc)}});
        *data_bytes += p.count * static_cast<int64_t>(dtype_size(p.dtype));
      }
      LLM_REQUIRE(::fsync(fd) == 0, "cannot fsync '", path, "'");
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
  }
  return records;
}

// meta.json's "files": every tensor with the records of every rank, in rank order.
json files_record(const std::vector<CkptFileLayout>& layouts,
                  const std::vector<std::string>& records_by_rank, int64_t* bytes) {
  json files = json::object();
  for (const CkptFileLayout& layout : layouts) {
    const std::string fname = layout.stem + ".safetensors";
    json tensors = json::object();
    for (const CkptTensorSlot& t : layout.tensors)
      tensors[t.name] = {{"dtype", dtype_safetensors_name(t.dtype)},
                         {"shape", t.shape},
                         {"pieces", json::array()}};
    for (const std::string& text : records_by_rank) {
      const json rec = json::parse(text);
      if (!rec.contains(fname)) continue;
      for (const auto& [name, list] : rec[fname].items())
        for (const json& r : list) tensors[name]["pieces"].push_back(r);
    }
    files[fname] = {{"bytes", layout.total_bytes}, {"tensors", tensors}};
    *bytes += layout.total_bytes;
  }
  return files;
}

// Rank 0's last phase: meta.json, the rename to step_N, `latest`, pruning.
void publish(const fs::path& root, const fs::path& tmp, const std::string& final_name,
             const json& meta, const CkptSaveOptions& options, CkptSaveResult* result) {
  stage(options, "meta");
  const std::string text = meta.dump(1) + "\n";
  write_text_synced((tmp / "meta.json").string(), text);
  result->bytes += static_cast<int64_t>(text.size());
  ckpt_fsync_path(tmp.string(), true);

  stage(options, "rename");
  std::error_code ec;
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
}

}  // namespace

CkptSaveResult checkpoint_save(const std::string& root_dir, int64_t step,
                               const nlohmann::json& meta, const std::vector<CkptPiece>& pieces,
                               const CkptSaveOptions& options) {
  LLM_ASSERT(meta.is_object(), "checkpoint meta must be a JSON object");
  LLM_ASSERT(options.world == 1 || options.all_gather_text, "several ranks need a collective");
  const SaveGroup group{options};
  const bool lead = options.rank == 0;
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path root(root_dir);
  const std::string final_name = checkpoint_dir_name(step);
  const std::vector<CkptFileLayout> layouts =
      ckpt_layouts_build(pieces_of_every_rank(group, pieces));

  // Rank 0 creates the temporary directory and every file at its full size.
  std::string tmp_name;
  group.agree([&] {
    if (!lead) return;
    std::error_code ec;
    fs::create_directories(root, ec);
    LLM_REQUIRE(!ec, "cannot create checkpoint directory '", root.string(), "': ", ec.message());
    remove_stale_temporaries(root);
    tmp_name = ".tmp_" + final_name + "_" + std::to_string(static_cast<long long>(::getpid()));
    fs::create_directories(root / tmp_name, ec);
    LLM_REQUIRE(!ec, "cannot create '", (root / tmp_name).string(), "': ", ec.message());
    stage(options, "tensors");
    for (const CkptFileLayout& layout : layouts)
      ckpt_file_create((root / tmp_name / (layout.stem + ".safetensors")).string(), layout);
  });
  const fs::path tmp = root / group.gather(tmp_name).front();

  // Every rank writes its pieces (a shared filesystem under several hosts).
  CkptSaveResult result;
  std::string records;
  group.agree([&] {
    LLM_REQUIRE(fs::is_directory(tmp), "checkpoint directory '", tmp.string(),
                "' is not visible on this rank (several hosts need train.out_dir on a shared "
                "filesystem)");
    records = write_pieces(tmp, layouts, pieces, options.rank, &result.data_bytes).dump();
  });
  const std::vector<std::string> all_records = group.gather(records);
  int64_t all_data = 0;
  for (const std::string& d : group.gather(std::to_string(result.data_bytes)))
    all_data += std::stoll(d);
  result.data_bytes = all_data;

  json full = meta;
  full["format"] = kCheckpointFormat;
  full["format_version"] = kCheckpointFormatVersion;
  full["step"] = step;
  full["world_size"] = options.world;
  full["files"] = files_record(layouts, all_records, &result.bytes);
  full["complete"] = true;
  std::string meta_bytes = "0";
  group.agree([&] {
    if (!lead) return;
    publish(root, tmp, final_name, full, options, &result);
    meta_bytes = std::to_string(result.bytes);
  });
  result.bytes = std::stoll(group.gather(meta_bytes).front());
  result.dir = (root / final_name).string();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace ledgerlm
