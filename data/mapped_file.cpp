// Read-only file mappings (see mapped_file.h).
#include "data/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "model/base/check.h"
#include "model/base/input_file.h"

namespace ledgerlm {

MappedFile::MappedFile(const std::string& path) {
  const int fd = input_file_open(path, "file");
  LLM_REQUIRE(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail(error_message("cannot stat '", path, "': ", std::strerror(err)));
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    data_ = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
    const int err = errno;
    ::close(fd);
    if (data_ == MAP_FAILED) {
      data_ = nullptr;
      fail(error_message("cannot map '", path, "': ", std::strerror(err)));
    }
    // Windows are read in a shuffled order: no read-ahead beyond the pages a window needs.
    ::madvise(data_, size_, MADV_RANDOM);
  } else {
    ::close(fd);
  }
}

void MappedFile::will_need(size_t offset, size_t bytes) const {
  if (data_ == nullptr || offset >= size_) return;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t begin = offset / page * page;
  const size_t end = std::min(size_, offset + bytes);
  ::madvise(static_cast<char*>(data_) + begin, end - begin, MADV_WILLNEED);
}

MappedFile::~MappedFile() {
  release();
}

void MappedFile::release() {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace ledgerlm
