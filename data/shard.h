// Token shards: the binary files train.bin / val.bin of a prepared data directory.
//
// Layout (all little-endian):
//   offset 0   8 bytes  magic "LLMTOKS1"
//   offset 8   u32      format version (kShardVersion)
//   offset 12  u32      token width in bytes: 2 when vocab_size <= 65535, else 4
//   offset 16  u64      token count
//   offset 24  count * width bytes of tokens (uint16 or int32)
// The file size must equal 24 + count * width exactly; anything else is rejected with an error
// naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>

#include "data/mapped_file.h"
#include "model/base/memory.h"

namespace ledgerlm {

inline constexpr char kShardMagic[8] = {'L', 'L', 'M', 'T', 'O', 'K', 'S', '1'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 24;

// Token width (2 or 4 bytes) for a vocabulary.
int shard_token_width(int64_t vocab_size);

struct ShardHeader {
  uint32_t version = 0;
  uint32_t width = 0;
  uint64_t count = 0;
};

// Writes `tokens` atomically (PATH.tmp, then rename). Every token must be in [0, vocab_size).
void shard_write(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size);

// Reads and validates the header (magic, version, width, file size).
ShardHeader shard_read_header(const std::string& path);

// Tokens of one shard at the file's width (uint16 or int32): a read-only map of the shard file
// (shared by every process on the host that maps it), or a Buffer for arrays made in memory.
// The memory ledger counts a shard's token bytes under MemTag::kData either way.
class TokenArray {
 public:
  TokenArray() = default;
  TokenArray(TokenArray&& other) noexcept { *this = std::move(other); }
  TokenArray& operator=(TokenArray&& other) noexcept;
  ~TokenArray();
  int64_t size() const { return count_; }
  int width() const { return width_; }
  int32_t at(int64_t i) const {
    return width_ == 2 ? static_cast<int32_t>(static_cast<const uint16_t*>(tokens_)[i])
                       : static_cast<const int32_t*>(tokens_)[i];
  }
  // Copies tokens [start, start + n) into out as int32.
  void copy(int64_t start, int64_t n, int32_t* out) const;
  const std::string& path() const { return path_; }

 private:
  friend TokenArray shard_load(const std::string&, MemoryTracker*, int64_t);
  friend TokenArray token_array_make(std::span<const int32_t>, int64_t, MemoryTracker*);
  void untrack();
  Buffer buf_;
  MappedFile map_;
  MemoryTracker* map_tracker_ = nullptr;  // the mapping's bytes are accounted here
  const void* tokens_ = nullptr;         // into buf_ or map_
  int64_t count_ = 0;
  int width_ = 0;
  std::string path_;
};

// An in-memory TokenArray (width from vocab_size), e.g. for tests; `tracker` may be null.
TokenArray token_array_make(std::span<const int32_t> tokens, int64_t vocab_size,
                            MemoryTracker* tracker);

// Loads a shard; when vocab_size > 0 also checks every token is below it. `tracker` may be null.
TokenArray shard_load(const std::string& path, MemoryTracker* tracker, int64_t vocab_size = 0);

}  // namespace ledgerlm
