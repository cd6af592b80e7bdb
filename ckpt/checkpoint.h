// Full training checkpoints: the on-disk format, atomic saves and verified loads.
//
// A checkpoint is a directory ROOT/step_000123/ (ROOT = runs/NAME/ckpt) holding
//   meta.json              format + version, step, the caller's state (trainer counters, loader
//                          position, RNG seed, scaler, resolved config, ledger figures) and, per
//                          data file, every tensor's dtype, logical shape and pieces with CRC-32C;
//   model.safetensors      weights, one tensor per parameter-table name;
//   optimizer.safetensors  optimizer state, "<param>.<state>" (m, v, momentum, codes.m,
//                          absmax.m, row, col, ...).
// Tensors are stored as full logical tensors (unsharded, unpadded, row-major), so the files do
// not depend on world size or ZeRO stage. A rank contributes pieces: element ranges
// [begin, begin + count) of logical tensors. The file layout is a pure function of the list of
// logical tensors, so under sharding every rank can pwrite its own ranges into the shared files
// with no gather to rank 0; meta.json records which rank wrote which range and its CRC, and a
// reader assembles any range it needs from whatever pieces were written (resharding on load).
//
// Saving is atomic: everything goes into ROOT/.tmp_step_N_PID/, each file is fsynced, meta.json
// is written last (with a CRC-32C of its own content), the directory is renamed to step_N and
// only then is ROOT/latest replaced (tmp + rename): that rename commits the save. Older
// checkpoints beyond `keep` are deleted after that. A save that fails (a full disk, an I/O
// error) removes everything it wrote before it throws, so it leaves no temporary behind and the
// disk no fuller; `latest` and every earlier checkpoint stay untouched. A save that is killed
// leaves its temporary directory, which the next job on the run removes while it holds the run's
// lock (checkpoint_remove_stale): nothing else ever deletes another save's temporaries.
//
// Several hosts: ROOT must be on a filesystem every host sees (NFS, Lustre, ...), since each rank
// writes its ranges into the same files and rank 0 writes meta.json from the gathered CRCs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "model/base/check.h"
#include "model/base/dtype.h"

namespace ledgerlm {

inline constexpr const char* kCheckpointFormat = "ledgerlm-checkpoint";
// Version 2 added the meta.json checksum; version 1 checkpoints (without it) are still read.
inline constexpr int kCheckpointFormatVersion = 2;
// meta.json's own checksum: CRC-32C of the record's canonical text without this key.
inline constexpr const char* kCheckpointMetaChecksumKey = "meta_crc32c";

// One rank's slice [begin, begin + count) of one logical tensor (flattened row-major).
// Fills `dst` with `count` elements of a piece, from element `offset` of the piece.
using CkptPieceReader = std::function<void(int64_t offset, int64_t count, void* dst)>;

// One part of a checkpoint tensor: elements [begin, begin + count) of tensor `name` in `file`.
// Its bytes come from `data` (host memory holding the whole part) or, when `data` is null, from
// `read`: the writer then streams the part through a bounded host buffer (CkptSaveOptions::
// stream_chunk_bytes) and computes its CRC on the way, so state that is not in host memory whole
// (a device's buffers, state offloaded to disk) is saved without a full host copy. Both give the
// same file bytes and the same CRC.
struct CkptPiece {
  std::string file;  // data file stem: "model" -> model.safetensors, "optimizer", ...
  std::string name;  // tensor name inside that file
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // logical shape of the whole tensor
  int64_t begin = 0;
  int64_t count = 0;
  const void* data = nullptr;  // count elements of dtype, or null: `read` streams them
  CkptPieceReader read;
};

// A save that failed, thrown by checkpoint_save on every rank alike (the ranks agreed on the
// failure, whichever rank hit it, and the message names that rank): the caller may report it
// once instead of once per rank.
class CkptSaveFailed : public Error {
 public:
  using Error::Error;
};

struct CkptSaveOptions {
  // Several ranks: every rank calls checkpoint_save with its own pieces; rank 0 creates the
  // directory and the files, each rank writes its pieces, rank 0 writes meta.json (with every
  // rank's CRCs) and renames. `all_gather_text` (every rank's text, in rank order, on every rank)
  // is the only collective needed; an error on any rank fails the save on all of them.
  int rank = 0;
  int world = 1;
  int64_t keep = 2;  // complete checkpoints kept (the newest); older ones are deleted
  // The host buffer a streamed piece (CkptPiece::read) passes through.
  int64_t stream_chunk_bytes = 4 << 20;
  // Test hook: called before each stage: "tensors" (nothing written yet), "meta" (data files
  // written), "rename" (meta.json written), "latest" (directory renamed), "prune" (committed).
  // Throwing from it simulates a save that fails at that point. For the binary the environment
  // variable LEDGERLM_TEST_CKPT_KILL=STAGE[@N] raises SIGKILL at STAGE of the process's N-th save
  // (default 1st): the crash-consistency tests use it; never set it otherwise.
  std::function<void(const std::string& stage)> on_stage;
  std::function<std::vector<std::string>(const std::string& mine)> all_gather_text;
};

struct CkptSaveResult {
  std::string dir;         // ROOT/step_000123
  int64_t bytes = 0;       // bytes written (data files + meta.json)
  int64_t data_bytes = 0;  // raw tensor bytes (what the ledger predicts: sum of numel x dtype)
  double seconds = 0.0;
};

// Writes a checkpoint for `step` under `root`. `meta` (a JSON object, rank 0's is used) is stored
// in meta.json beside the format fields. Throws Error naming the path on any I/O failure (the
// previous checkpoint stays intact).
CkptSaveResult checkpoint_save(const std::string& root, int64_t step, const nlohmann::json& meta,
                               const std::vector<CkptPiece>& pieces,
                               const CkptSaveOptions& options = {});

// The value of meta.json's kCheckpointMetaChecksumKey for `meta` ("crc32c:0123abcd"): the
// CRC-32C of its compact JSON text with that key removed. The text is canonical (keys sorted,
// numbers in shortest round-trip form), so any change to a value — an edited step — changes it.
std::string checkpoint_meta_checksum(const nlohmann::json& meta);

// Leftovers of saves that were killed: temporary directories and `latest.tmp` are removed, a
// step_N that was moved aside (.old_step_N) for a same-step save comes back when step_N is
// missing. Only while holding the run's lock: then no save is running. Returns entries touched.
int checkpoint_remove_stale(const std::string& root);

// "step_000123"
std::string checkpoint_dir_name(int64_t step);
// The checkpoint ROOT/latest names, or "" if there is none. A `latest` that names a missing or
// incomplete directory is an Error (it is only ever written after the directory is complete).
std::string checkpoint_latest(const std::string& root);
// Complete checkpoints under root (those with a meta.json), oldest first, as (step, dir).
std::vector<std::pair<int64_t, std::string>> checkpoint_list(const std::string& root);
// Resolves a user-given path: a checkpoint directory (has meta.json), a ckpt root or a run
// directory (its ckpt/latest). Throws Error naming the path if none is found.
std::string checkpoint_resolve(const std::string& path);

// A checkpoint opened for reading. open() checks meta.json (syntax, its checksum, format,
// version, complete), every data file (safetensors structure, size recorded in meta.json) and
// that each tensor's pieces tile the whole tensor. Reads verify the CRC of every piece they touch.
// Every problem is one Error naming the file (and the tensor) and the mismatch.
class CheckpointReader {
 public:
  static CheckpointReader open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& meta() const { return meta_; }
  int64_t step() const { return step_; }
  int64_t bytes() const { return bytes_; }  // data files + meta.json

  bool has(const std::string& file, const std::string& name) const;
  // Names of the tensors of a data file (sorted).
  std::vector<std::string> tensor_names(const std::string& file) const;
  const SafeTensorInfo& info(const std::string& file, const std::string& name) const;

  // Elements [begin, begin + count) of a logical tensor, after checking its dtype and logical
  // shape against what the caller expects and the CRC of every saved piece overlapping the range.
  void read(const std::string& file, const std::string& name, DType dtype,
            const std::vector<int64_t>& shape, int64_t begin, int64_t count, void* dst) const;
  // A whole tensor of any float dtype widened to fp32 (exact), shape checked.
  std::vector<float> read_f32(const std::string& file, const std::string& name,
                              const std::vector<int64_t>& shape) const;
  // Reads every tensor and checks every CRC.
  void verify_all() const;

 private:
  struct PieceRecord {
    int64_t begin = 0, count = 0;
    uint32_t crc = 0;
  };
  struct DataFile {
    std::string path;
    std::unique_ptr<SafeTensorsFile> file;
    std::map<std::string, std::vector<PieceRecord>> pieces;
  };
  CheckpointReader() = default;
  void open_data_file(const std::string& fname, const nlohmann::json& desc,
                      const std::string& meta_path);
  const DataFile& data_file(const std::string& file) const;
  void read_checked(const DataFile& f, const SafeTensorInfo& info, int64_t begin, int64_t count,
                    void* dst) const;

  std::string dir_;
  nlohmann::json meta_;
  int64_t step_ = 0;
  int64_t bytes_ = 0;
  std::map<std::string, DataFile> files_;
};

}  // namespace ledgerlm
