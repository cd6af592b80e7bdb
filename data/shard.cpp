// Token shard write (atomic) and read (validated), see shard.h for the layout.
#include "data/shard.h"

#include <bit>
#include <cstdio>
#include <cstring>
#include <utility>
#include <filesystem>
#include <fstream>
#include <vector>

#include "model/base/check.h"

namespace ledgerlm {

// The format is little-endian and we write/read memory images directly.
static_assert(std::endian::native == std::endian::little, "shards assume a little-endian host");

namespace {

template <class T>
void put(std::vector<char>* out, T value) {
  const char* p = reinterpret_cast<const char*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}

}  // namespace

int shard_token_width(int64_t vocab_size) {
  return vocab_size <= 65535 ? 2 : 4;
}

void shard_write(const std::string& path, std::span<const int32_t> tokens, int64_t vocab_size) {
  LLM_REQUIRE(vocab_size > 0 && vocab_size <= INT32_MAX, path, ": vocab_size ", vocab_size,
              " out of range");
  const int width = shard_token_width(vocab_size);
  for (size_t i = 0; i < tokens.size(); ++i) {
    LLM_ASSERT(tokens[i] >= 0 && tokens[i] < vocab_size, "token ", tokens[i], " at ", i,
               " outside vocab ", vocab_size, " writing ", path);
  }
  std::vector<char> header;
  header.insert(header.end(), kShardMagic, kShardMagic + 8);
  put<uint32_t>(&header, kShardVersion);
  put<uint32_t>(&header, static_cast<uint32_t>(width));
  put<uint64_t>(&header, tokens.size());
  LLM_ASSERT(static_cast<int64_t>(header.size()) == kShardHeaderBytes);

  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    LLM_REQUIRE(f, "cannot create ", tmp);
    f.write(header.data(), static_cast<std::streamsize>(header.size()));
    if (width == 4) {
      f.write(reinterpret_cast<const char*>(tokens.data()),
              static_cast<std::streamsize>(tokens.size() * 4));
    } else {
      // Narrow in blocks to keep the temporary small.
      std::vector<uint16_t> block;
      for (size_t i = 0; i < tokens.size(); i += 1 << 20) {
        size_t n = std::min<size_t>(tokens.size() - i, 1 << 20);
        block.assign(tokens.begin() + i, tokens.begin() + i + n);
        f.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n * 2));
      }
    }
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      fail(error_message("error while writing ", tmp, " (disk full?)"));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    fail(error_message("cannot rename ", tmp, " to ", path, ": ", ec.message()));
  }
}

ShardHeader shard_read_header(const std::string& path) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  LLM_REQUIRE(!ec, "token shard ", path, ": cannot read (", ec.message(), ")");
  std::ifstream f(path, std::ios::binary);
  LLM_REQUIRE(f, "token shard ", path, ": cannot open");
  LLM_REQUIRE(static_cast<int64_t>(size) >= kShardHeaderBytes, "token shard ", path,
              ": truncated header (", size, " bytes, expected at least ", kShardHeaderBytes, ")");
  char raw[kShardHeaderBytes];
  f.read(raw, kShardHeaderBytes);
  LLM_REQUIRE(f, "token shard ", path, ": cannot read the header");
  LLM_REQUIRE(std::memcmp(raw, kShardMagic, 8) == 0, "token shard ", path,
              ": wrong magic (expected LLMTOKS1; not a ledgerlm token shard)");
  ShardHeader h;
  std::memcpy(&h.version, raw + 8, 4);
  std::memcpy(&h.width, raw + 12, 4);
  std::memcpy(&h.count, raw + 16, 8);
  LLM_REQUIRE(h.version == kShardVersion, "token shard ", path, ": format version ", h.version,
              " is not supported (expected ", kShardVersion, ")");
  LLM_REQUIRE(h.width == 2 || h.width == 4, "token shard ", path, ": token width ", h.width,
              " is invalid (expected 2 or 4)");
  LLM_REQUIRE(h.count <= (uint64_t{1} << 40), "token shard ", path, ": token count ", h.count,
              " is implausible (corrupt header)");
  uint64_t expected = kShardHeaderBytes + h.count * h.width;
  LLM_REQUIRE(size >= expected, "token shard ", path, ": truncated (", size, " bytes, header says ",
              h.count, " tokens x ", h.width, " bytes + ", kShardHeaderBytes, " = ", expected, ")");
  LLM_REQUIRE(size == expected, "token shard ", path, ": ", size - expected,
              " trailing bytes after ", h.count, " tokens (expected size ", expected, ")");
  return h;
}

void TokenArray::copy(int64_t start, int64_t n, int32_t* out) const {
  LLM_ASSERT(start >= 0 && n >= 0 && start + n <= count_);
  if (width_ == 4) {
    std::memcpy(out, static_cast<const int32_t*>(tokens_) + start, static_cast<size_t>(n) * 4);
  } else {
    const uint16_t* src = static_cast<const uint16_t*>(tokens_) + start;
    for (int64_t i = 0; i < n; ++i) out[i] = src[i];
  }
}

void TokenArray::untrack() {
  if (map_tracker_ != nullptr) map_tracker_->on_free(MemTag::kData, static_cast<size_t>(count_) * width_);
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
  TokenArray t;
  t.path_ = path;
  t.width_ = static_cast<int>(h.width);
  t.count_ = static_cast<int64_t>(h.count);
  if (h.count > 0) {
    t.map_ = MappedFile(path);
    LLM_REQUIRE(t.map_.size() == kShardHeaderBytes + h.count * h.width, "token shard ", path,
                ": changed size while being opened");
    t.tokens_ = t.map_.data() + kShardHeaderBytes;
    if (tracker != nullptr) {
      tracker->on_alloc(MemTag::kData, h.count * h.width);
      t.map_tracker_ = tracker;
    }
  }
  if (vocab_size > 0) {
    LLM_REQUIRE(static_cast<int>(h.width) == shard_token_width(vocab_size), "token shard ", path,
                ": token width ", h.width, " does not match vocab_size ", vocab_size);
    for (int64_t i = 0; i < t.count_; ++i) {
      int32_t v = t.at(i);
      LLM_REQUIRE(v >= 0 && v < vocab_size, "token shard ", path, ": token ", v, " at index ", i,
                  " is outside the vocab [0, ", vocab_size, ")");
    }
  }
  return t;
}

}  // namespace ledgerlm
