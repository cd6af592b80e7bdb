// A read-only memory map of a whole file (RAII). Token shards are mapped rather than read into
// every process: the pages live in the page cache once per host, shared by every rank that
// maps the same file, and each rank touches only the windows of its own slices.
#pragma once

#include <cstddef>
#include <string>

namespace ledgerlm {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only; throws Error naming the file when it cannot.
  explicit MappedFile(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }
  // Asks the kernel to read [offset, offset + bytes) ahead: the mapping is advised MADV_RANDOM
  // (windows), so a reader about to scan a whole range (a checksum block) says so.
  void will_need(size_t offset, size_t bytes) const;

 private:
  void release();
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ledgerlm
