// One file of offloaded state (optim.offload = disk): created at its full size with its blocks
// reserved (posix_fallocate, so a full disk shows at start-up rather than in the middle of a
// step), read and written at byte ranges, and kept out of the page cache. On a machine with far
// more RAM than state, buffered files would simply stay cached: resident memory would look small
// and the "disk bandwidth" would be memcpy speed. So every write is flushed to the device
// (sync_file_range) and every range read or written is dropped from the cache afterwards
// (posix_fadvise DONTNEED); resident_bytes() (mincore) reports what stays cached anyway (at most
// the partial pages at a range's two ends), and the ledger prints it.
//
// Every block of kChecksumBlock bytes (a page: the unit the kernel reads and writes anyway) has a
// CRC-32C (model/base/crc32c.h), kept in memory — the files live only as long as the process —
// set as the block is written and checked as it is read back, so bytes the device returns other
// than were written (a flipped bit, a torn write, another process writing into the file) stop
// the run with an error naming the file instead of training on. A range that starts or ends
// inside a block also reads the rest of that block from the file (its own pages) to complete the
// block's CRC.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ledgerlm {

class OffloadFile {
 public:
  OffloadFile() = default;
  // Creates (or truncates) `path` with `bytes` zero bytes reserved on the device. Throws Error
  // naming the file on failure (a full disk: "No space left on device").
  OffloadFile(const std::string& path, int64_t bytes);
  ~OffloadFile();
  OffloadFile(const OffloadFile&) = delete;
  OffloadFile& operator=(const OffloadFile&) = delete;
  OffloadFile(OffloadFile&& other) noexcept;
  OffloadFile& operator=(OffloadFile&& other) noexcept;

  const std::string& path() const { return path_; }
  int64_t bytes() const { return bytes_; }
  // Renames the file (the descriptor stays valid); throws Error on failure.
  void rename_to(const std::string& path);

  static constexpr int64_t kChecksumBlock = 4096;

  // Reads / writes [offset, offset + bytes), then drops the range from the page cache (a write
  // is on the device when it returns). Return "" or the error (strerror text, or for a read
  // whose bytes fail their checksum which bytes, with `*damaged` set): they run on the I/O
  // thread, which hands errors to the caller instead of throwing. One caller at a time.
  std::string read(int64_t offset, int64_t bytes, void* dst, bool* damaged = nullptr);
  std::string write(int64_t offset, int64_t bytes, const void* src);

  // Bytes of the file the page cache holds now (mincore over a read-only mapping); -1 when the
  // kernel does not say.
  int64_t resident_bytes() const;
  // Bytes the file occupies on the device (st_blocks), what `du` reports.
  int64_t allocated_bytes() const;

 private:
  void close_file();
  // Reads the bytes of the blocks of [offset, end) outside it ([block start, offset) and
  // [end, block end)) into edges_; sets the blocks' span [*lo, *hi).
  std::string read_edges(int64_t offset, int64_t end, int64_t* lo, int64_t* hi);
  // The CRC of `block`, whose bytes inside [offset, end) are at data (data = offset's byte) and
  // the rest in edges_ (read_edges).
  uint32_t block_crc(int64_t block, int64_t offset, int64_t end, const char* data) const;

  std::string path_;
  int64_t bytes_ = 0;
  int fd_ = -1;
  std::vector<uint32_t> crcs_;  // per kChecksumBlock block
  std::vector<char> edges_;     // a range's partial first and last blocks' other bytes
};

// Measured sequential bandwidth of the device under `dir`, the page cache dropped as above.
struct DiskBandwidth {
  double write_mb_s = 0.0, read_mb_s = 0.0;
  int64_t probe_bytes = 0;
};
// Writes and reads back the scratch file `path` (checksums included, as the pager's I/O) of
// `bytes` in chunks of `chunk` bytes, then removes it. The caller owns the path: processes that
// probe one path together would truncate and remove each other's file.
DiskBandwidth offload_probe_bandwidth(const std::string& path, int64_t bytes, int64_t chunk);

}  // namespace ledgerlm
