// Token shards: the binary files train.bin / val.bin of a prepared data directory, with a CRC-32C
// per MiB of tokens so that damage is caught where the tokens are read.
//
// Layout, format version 2 (all little-endian):
//   offset 0   8 bytes  magic "LLMTOKS1"
//   offset 8   u32      format version (kShardVersion = 2)
//   offset 12  u32      token width in bytes: 2 when vocab_size <= 65535, else 4
//   offset 16  u64      token count N
//   offset 24  u32      block size B in bytes (kShardBlockBytes = 1 MiB as written; any power of
//                       two in [16, 2^30] is read)
//   offset 28  u32      CRC-32C of bytes 0..27 followed by the checksum table: the header's own
//   offset 32  N * width bytes of tokens (uint16 or int32)
//   then       ceil(N * width / B) x u32: the checksum table, the CRC-32C of each block of B token
//              bytes (the last block holds the rest)
// The file size must equal 32 + N * width + 4 * blocks exactly. Opening a shard reads and checks
// the header and the table (a few KiB per GiB of tokens); each block's tokens are checked against
// its CRC (and against the vocabulary) the first time anything in it is read, so a run pays for
// the blocks it uses, once, and a flipped bit anywhere is reported with the file and the block.
//
// Format version 1 (a 24-byte header, no checksums) is refused with one line saying to re-run
// `ledgerlm prepare`: prepare reproduces the same tokens from the same input (data/README.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "data/mapped_file.h"
#include "model/base/memory.h"

namespace ledgerlm {

inline constexpr char kShardMagic[8] = {'L', 'L', 'M', 'T', 'O', 'K', 'S', '1'};
inline constexpr uint32_t kShardVersion = 2;
inline constexpr int64_t kShardHeaderBytes = 32;
inline constexpr uint32_t kShardBlockBytes = uint32_t{1} << 20;

// Token width (2 or 4 bytes) for a vocabulary.
int shard_token_width(int64_t vocab_size);

struct ShardHeader {
  uint32_t version = 0;
  uint32_t width = 0;
  uint64_t count = 0;
  uint32_t block_bytes = 0;
  std::vector<uint32_t> block_crcs;  // one per block of token bytes
};

// Reads and validates the header and the checksum table: magic, version, width, block size, file
// size, and the CRC over header and table. Throws one Error naming the file.
ShardHeader shard_read_header(const std::string& path);

// Writes a shard as tokens arrive, in bounded memory: PATH.tmp first (removed on error or when
// the writer is destroyed unfinished), renamed to PATH by finish().
class ShardWriter {
 public:
  // Every appended token must lie in [0, vocab_size). `block_bytes` (a power of two, >= 16) is
  // kShardBlockBytes except in tests that need many blocks in a small file.
  ShardWriter(const std::string& path, int64_t vocab_size, uint32_t block_bytes = kShardBlockBytes);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void append(std::span<const int32_t> tokens);
  // Writes the checksum table and the header, then renames PATH.tmp to PATH.
  void finish();
  int64_t count() const { return count_; }

 private:
  void flush_block();
  void write_all(const void* data, size_t bytes, int64_t offset);

  std::string path_, tmp_;
  int fd_ = -1;
  int64_t vocab_size_;
  int width_;
  uint32_t block_bytes_;
  std::vector<char> block_;  // token bytes of the current block
  size_t block_fill_ = 0;
  std::vector<uint32_t> crcs_;
  int64_t count_ = 0;
  int64_t file_offset_ = kShardHeaderBytes;
};

// Writes `tokens` as one shard (ShardWriter). Every token must be in [0, vocab_size).
void shard_write(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size,
                 uint32_t block_bytes = kShardBlockBytes);

// Tokens of one shard at the file's width (uint16 or int32): a read-only map of the shard file
// (shared by every process on the host that maps it), or a Buffer for arrays made in memory.
// The memory ledger counts a shard's token bytes under MemTag::kData either way. A mapped shard's
// blocks are verified on first read (CRC-32C, token values below the vocabulary): at(), copy()
// and verify_all() throw one Error naming the file and the block that fails. Reads from several
// threads at once are safe (a block may then be verified twice).
class TokenArray {
 public:
  TokenArray() = default;
  TokenArray(TokenArray&& other) noexcept { *this = std::move(other); }
  TokenArray& operator=(TokenArray&& other) noexcept;
  ~TokenArray();
  int64_t size() const { return count_; }
  int width() const { return width_; }
  int32_t at(int64_t i) const {
    verify(i, 1);
    return width_ == 2 ? static_cast<int32_t>(static_cast<const uint16_t*>(tokens_)[i])
                       : static_cast<const int32_t*>(tokens_)[i];
  }
  // Copies tokens [start, start + n) into out as int32.
  void copy(int64_t start, int64_t n, int32_t* out) const;
  // Verifies every block not verified yet (tools, the fuzz target).
  void verify_all() const;
  const std::string& path() const { return path_; }

 private:
  friend TokenArray shard_load(const std::string&, MemoryTracker*, int64_t);
  friend TokenArray token_array_make(std::span<const int32_t>, int64_t, MemoryTracker*);
  void untrack();
  // Verifies the blocks holding tokens [start, start + n) that are not verified yet.
  void verify(int64_t start, int64_t n) const {
    if (block_crcs_.empty() || n <= 0) return;
    const int64_t first = (start * width_) >> block_shift_;
    const int64_t last = ((start + n) * width_ - 1) >> block_shift_;
    for (int64_t b = first; b <= last; ++b)
      if (verified_[b].load(std::memory_order_acquire) == 0) verify_block(b);
  }
  void verify_block(int64_t block) const;

  Buffer buf_;
  MappedFile map_;
  MemoryTracker* map_tracker_ = nullptr;  // the mapping's bytes are accounted here
  const void* tokens_ = nullptr;          // into buf_ or map_
  int64_t count_ = 0;
  int width_ = 0;
  std::string path_;
  // Mapped shards only: the stored CRC of each block, and whether it was verified.
  std::vector<uint32_t> block_crcs_;
  std::unique_ptr<std::atomic<uint8_t>[]> verified_;
  int block_shift_ = 0;
  int64_t vocab_size_ = 0;  // 0: token values unchecked
};

// An in-memory TokenArray (width from vocab_size), e.g. for tests; `tracker` may be null.
TokenArray token_array_make(std::span<const int32_t> tokens, int64_t vocab_size,
                            MemoryTracker* tracker);

// Maps a shard after checking its header and checksum table; when vocab_size > 0 the token width
// must suit it and every token is checked to be below it as its block is verified. `tracker` may
// be null.
TokenArray shard_load(const std::string& path, MemoryTracker* tracker, int64_t vocab_size = 0);

}  // namespace ledgerlm
