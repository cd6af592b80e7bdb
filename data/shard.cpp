// Token shard reading: the header and checksum table checked on open, each block of tokens
// verified on first read (see shard.h for the layout). Writing: shard_writer.cpp.
#include "data/shard.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "model/base/input_file.h"

namespace ledgerlm {

// The format is little-endian and we read memory images directly.
static_assert(std::endian::native == std::endian::little, "shards assume a little-endian host");

namespace {

// What every damaged-shard message ends with: the remedy.
constexpr const char* kRebuild = "re-run `ledgerlm prepare` to rebuild the data directory";

// "MiB block 3 of 12" for the blocks prepare writes, "block 3 of 12 (16-byte blocks)" otherwise.
std::string block_name(int64_t block, int64_t blocks, uint32_t block_bytes) {
  if (block_bytes == kShardBlockBytes) return error_message("MiB block ", block, " of ", blocks);
  return error_message("block ", block, " of ", blocks, " (", block_bytes, "-byte blocks)");
}

}  // namespace

int shard_token_width(int64_t vocab_size) {
  return vocab_size <= 65535 ? 2 : 4;
}

ShardHeader shard_read_header(const std::string& path) {
  const int fd = input_file_open(path, "token shard");
  LLM_REQUIRE(fd >= 0, "token shard ", path, ": cannot open (", errno_text(), ")");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st;
  LLM_REQUIRE(::fstat(fd, &st) == 0, "token shard ", path, ": cannot read (", errno_text(), ")");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  // `bytes` at `offset`, all of them (false on a read error or end of file).
  auto read_at = [fd](void* dst, uint64_t bytes, uint64_t offset) {
    char* p = static_cast<char*>(dst);
    while (bytes > 0) {
      const ssize_t n = ::pread(fd, p, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      p += n;
      bytes -= static_cast<uint64_t>(n);
      offset += static_cast<uint64_t>(n);
    }
    return true;
  };
  // The magic and version first, so that a version-1 shard (24-byte header) gets its own message.
  LLM_REQUIRE(size >= 12, "token shard ", path, ": truncated header (", size,
              " bytes, expected at least ", kShardHeaderBytes, ")");
  char raw[kShardHeaderBytes] = {};
  LLM_REQUIRE(read_at(raw, std::min<uint64_t>(size, kShardHeaderBytes), 0), "token shard ", path,
              ": cannot read the header");
  LLM_REQUIRE(std::memcmp(raw, kShardMagic, 8) == 0, "token shard ", path,
              ": wrong magic (expected LLMTOKS1; not a ledgerlm token shard)");
  ShardHeader h;
  std::memcpy(&h.version, raw + 8, 4);
  LLM_REQUIRE(
      h.version != 1, "token shard ", path,
      ": format version 1 has no checksums (written by an older ledgerlm); ", kRebuild,
      " (the same --input gives the same tokens; --tokenizer from:DIR keeps its tokenizer)");
  LLM_REQUIRE(h.version == kShardVersion, "token shard ", path, ": format version ", h.version,
              " is not supported (expected ", kShardVersion, ")");
  LLM_REQUIRE(static_cast<int64_t>(size) >= kShardHeaderBytes, "token shard ", path,
              ": truncated header (", size, " bytes, expected at least ", kShardHeaderBytes, ")");
  uint32_t stored_crc = 0;
  std::memcpy(&h.width, raw + 12, 4);
  std::memcpy(&h.count, raw + 16, 8);
  std::memcpy(&h.block_bytes, raw + 24, 4);
  std::memcpy(&stored_crc, raw + 28, 4);
  LLM_REQUIRE(h.width == 2 || h.width == 4, "token shard ", path, ": token width ", h.width,
              " is invalid (expected 2 or 4)");
  LLM_REQUIRE(h.count <= (uint64_t{1} << 40), "token shard ", path, ": token count ", h.count,
              " is implausible (corrupt header)");
  LLM_REQUIRE(h.block_bytes >= 16 && h.block_bytes <= (uint32_t{1} << 30) &&
                  std::has_single_bit(h.block_bytes),
              "token shard ", path, ": checksum block size ", h.block_bytes,
              " is invalid (expected a power of two from 16 to 2^30; corrupt header)");
  const uint64_t token_bytes = h.count * h.width;
  const uint64_t blocks = (token_bytes + h.block_bytes - 1) / h.block_bytes;
  const uint64_t expected = kShardHeaderBytes + token_bytes + 4 * blocks;
  LLM_REQUIRE(size >= expected, "token shard ", path, ": truncated (", size, " bytes, header says ",
              h.count, " tokens x ", h.width, " bytes + ", blocks,
              " block checksums + header = ", expected, ")");
  LLM_REQUIRE(size == expected, "token shard ", path, ": ", size - expected,
              " trailing bytes after ", h.count, " tokens and their checksums (expected size ",
              expected, ")");
  h.block_crcs.resize(blocks);
  LLM_REQUIRE(read_at(h.block_crcs.data(), 4 * blocks, kShardHeaderBytes + token_bytes),
              "token shard ", path, ": cannot read the checksum table");
  const uint32_t crc = crc32c(h.block_crcs.data(), 4 * blocks, crc32c(raw, 28));
  LLM_REQUIRE(crc == stored_crc, "token shard ", path,
              ": the header or the checksum table fails its checksum (stored ",
              crc32c_text(stored_crc), ", computed ", crc32c_text(crc), "): the file is damaged; ",
              kRebuild);
  return h;
}

void TokenArray::verify_block(int64_t block) const {
  const uint32_t block_bytes = uint32_t{1} << block_shift_;
  const int64_t token_bytes = count_ * width_;
  const int64_t begin = block * block_bytes;
  const int64_t bytes = std::min<int64_t>(block_bytes, token_bytes - begin);
  const char* p = static_cast<const char*>(tokens_) + begin;
  map_.will_need(static_cast<size_t>(kShardHeaderBytes + begin), static_cast<size_t>(bytes));
  const uint32_t crc = crc32c(p, static_cast<size_t>(bytes));
  const uint32_t stored = block_crcs_[static_cast<size_t>(block)];
  const int64_t blocks = static_cast<int64_t>(block_crcs_.size());
  LLM_REQUIRE(crc == stored, "token shard ", path_, ": ", block_name(block, blocks, block_bytes),
              " (token bytes ", begin, "..", begin + bytes - 1,
              ") fails its CRC-32C checksum (stored ", crc32c_text(stored), ", computed ",
              crc32c_text(crc), "): the file is damaged; ", kRebuild);
  if (vocab_size_ > 0) {
    for (int64_t i = begin / width_; i < (begin + bytes) / width_; ++i) {
      const int32_t v = width_ == 2 ? static_cast<int32_t>(static_cast<const uint16_t*>(tokens_)[i])
                                    : static_cast<const int32_t*>(tokens_)[i];
      LLM_REQUIRE(v >= 0 && v < vocab_size_, "token shard ", path_, ": token ", v, " at index ", i,
                  " is outside the vocab [0, ", vocab_size_, ")");
    }
  }
  verified_[block].store(1, std::memory_order_release);
}

void TokenArray::verify_all() const {
  verify(0, count_);
}

void TokenArray::copy(int64_t start, int64_t n, int32_t* out) const {
  LLM_ASSERT(start >= 0 && n >= 0 && start + n <= count_);
  verify(start, n);
  if (width_ == 4) {
    std::memcpy(out, static_cast<const int32_t*>(tokens_) + start, static_cast<size_t>(n) * 4);
  } else {
    const uint16_t* src = static_cast<const uint16_t*>(tokens_) + start;
    for (int64_t i = 0; i < n; ++i) out[i] = src[i];
  }
}

void TokenArray::untrack() {
  if (map_tracker_ != nullptr)
    map_tracker_->on_free(MemTag::kData, static_cast<size_t>(count_) * width_);
  map_tracker_ = nullptr;
}

TokenArray::~TokenArray() {
  untrack();
}

TokenArray& TokenArray::operator=(TokenArray&& other) noexcept {
  if (this != &other) {
    untrack();
    buf_ = std::move(other.buf_);
    map_ = std::move(other.map_);
    map_tracker_ = std::exchange(other.map_tracker_, nullptr);
    tokens_ = std::exchange(other.tokens_, nullptr);
    count_ = std::exchange(other.count_, 0);
    width_ = other.width_;
    path_ = std::move(other.path_);
    block_crcs_ = std::move(other.block_crcs_);
    other.block_crcs_.clear();
    verified_ = std::move(other.verified_);
    block_shift_ = other.block_shift_;
    vocab_size_ = other.vocab_size_;
  }
  return *this;
}

TokenArray token_array_make(std::span<const int32_t> tokens, int64_t vocab_size,
                            MemoryTracker* tracker) {
  TokenArray t;
  t.path_ = "<memory>";
  t.width_ = shard_token_width(vocab_size);
  t.count_ = static_cast<int64_t>(tokens.size());
  if (tokens.empty()) return t;
  t.buf_ = Buffer(tracker, MemTag::kData, tokens.size() * t.width_);
  t.tokens_ = t.buf_.data();
  for (size_t i = 0; i < tokens.size(); ++i) {
    LLM_REQUIRE(tokens[i] >= 0 && tokens[i] < vocab_size, "token ", tokens[i], " at index ", i,
                " is outside the vocab [0, ", vocab_size, ")");
    if (t.width_ == 2) {
      t.buf_.as<uint16_t>()[i] = static_cast<uint16_t>(tokens[i]);
    } else {
      t.buf_.as<int32_t>()[i] = tokens[i];
    }
  }
  return t;
}

TokenArray shard_load(const std::string& path, MemoryTracker* tracker, int64_t vocab_size) {
  ShardHeader h = shard_read_header(path);
  if (vocab_size > 0) {
    LLM_REQUIRE(static_cast<int>(h.width) == shard_token_width(vocab_size), "token shard ", path,
                ": token width ", h.width, " does not match vocab_size ", vocab_size);
  }
  TokenArray t;
  t.path_ = path;
  t.width_ = static_cast<int>(h.width);
  t.count_ = static_cast<int64_t>(h.count);
  t.vocab_size_ = vocab_size;
  if (h.count > 0) {
    t.map_ = MappedFile(path);
    LLM_REQUIRE(t.map_.size() == kShardHeaderBytes + h.count * h.width + 4 * h.block_crcs.size(),
                "token shard ", path, ": changed size while being opened");
    t.tokens_ = t.map_.data() + kShardHeaderBytes;
    t.block_shift_ = std::countr_zero(h.block_bytes);
    t.verified_ = std::make_unique<std::atomic<uint8_t>[]>(h.block_crcs.size());
    t.block_crcs_ = std::move(h.block_crcs);
    if (tracker != nullptr) {
      tracker->on_alloc(MemTag::kData, h.count * h.width);
      t.map_tracker_ = tracker;
    }
  }
  return t;
}

}  // namespace ledgerlm
