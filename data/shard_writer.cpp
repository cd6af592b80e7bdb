// Token shard writing in bounded memory: tokens narrowed to the shard's width one block at a time,
// each block's CRC-32C computed as it is written, the checksum table and the header (whose CRC
// covers the table) written at the end, then PATH.tmp renamed to PATH. See shard.h.
#include <fcntl.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "data/shard.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"

namespace ledgerlm {

ShardWriter::ShardWriter(const std::string& path, int64_t vocab_size, uint32_t block_bytes)
    : path_(path), tmp_(path + ".tmp"), vocab_size_(vocab_size) {
  LLM_REQUIRE(vocab_size > 0 && vocab_size <= INT32_MAX, path, ": vocab_size ", vocab_size,
              " out of range");
  LLM_REQUIRE(
      block_bytes >= 16 && block_bytes <= (uint32_t{1} << 30) && std::has_single_bit(block_bytes),
      path, ": checksum block size ", block_bytes, " is not a power of two >= 16");
  width_ = shard_token_width(vocab_size);
  block_bytes_ = block_bytes;
  block_.resize(block_bytes);
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  LLM_REQUIRE(fd_ >= 0, "cannot create ", tmp_, " (", std::strerror(errno), ")");
}

ShardWriter::~ShardWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    std::remove(tmp_.c_str());
  }
}

void ShardWriter::write_all(const void* data, size_t bytes, int64_t offset) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::pwrite(fd_, p, bytes, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      fail(error_message("error while writing ", tmp_, " (", std::strerror(err), ")"));
    }
    p += n;
    bytes -= static_cast<size_t>(n);
    offset += n;
  }
}

void ShardWriter::flush_block() {
  if (block_fill_ == 0) return;
  crcs_.push_back(crc32c(block_.data(), block_fill_));
  write_all(block_.data(), block_fill_, file_offset_);
  file_offset_ += static_cast<int64_t>(block_fill_);
  block_fill_ = 0;
}

void ShardWriter::append(std::span<const int32_t> tokens) {
  LLM_ASSERT(fd_ >= 0, "ShardWriter::append after finish: ", path_);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    LLM_ASSERT(t >= 0 && t < vocab_size_, "token ", t, " at ", count_ + static_cast<int64_t>(i),
               " outside vocab ", vocab_size_, " writing ", path_);
    // The block size is a multiple of both widths, so a token never straddles two blocks.
    if (width_ == 2) {
      const uint16_t v = static_cast<uint16_t>(t);
      std::memcpy(block_.data() + block_fill_, &v, 2);
    } else {
      std::memcpy(block_.data() + block_fill_, &t, 4);
    }
    block_fill_ += static_cast<size_t>(width_);
    if (block_fill_ == block_bytes_) flush_block();
  }
  count_ += static_cast<int64_t>(tokens.size());
}

void ShardWriter::finish() {
  LLM_ASSERT(fd_ >= 0, "ShardWriter::finish twice: ", path_);
  flush_block();
  const size_t table_bytes = crcs_.size() * 4;
  write_all(crcs_.data(), table_bytes, file_offset_);
  char header[kShardHeaderBytes] = {};
  const uint32_t version = kShardVersion, width = static_cast<uint32_t>(width_);
  const uint64_t count = static_cast<uint64_t>(count_);
  std::memcpy(header, kShardMagic, 8);
  std::memcpy(header + 8, &version, 4);
  std::memcpy(header + 12, &width, 4);
  std::memcpy(header + 16, &count, 8);
  std::memcpy(header + 24, &block_bytes_, 4);
  const uint32_t crc = crc32c(crcs_.data(), table_bytes, crc32c(header, 28));
  std::memcpy(header + 28, &crc, 4);
  write_all(header, sizeof header, 0);
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    fail(error_message("error while writing ", tmp_, " (", std::strerror(err), ")"));
  }
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) {
    std::remove(tmp_.c_str());
    fail(error_message("cannot rename ", tmp_, " to ", path_, ": ", ec.message()));
  }
}

void shard_write(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size,
                 uint32_t block_bytes) {
  ShardWriter w(path, vocab_size, block_bytes);
  w.append(tokens);
  w.finish();
}

}  // namespace ledgerlm
