// OffloadFile (see offload_file.h): byte-range I/O that bypasses the page cache's memory.
#include "train/offload/offload_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include "model/base/check.h"
#include "model/base/crc32c.h"

namespace ledgerlm {
namespace {

std::string text_of(int err) {
  return std::strerror(err);
}

// Writes the range to the device and waits for it, then drops it from the cache.
std::string settle(int fd, int64_t offset, int64_t bytes, bool written) {
  if (written && sync_file_range(fd, offset, bytes,
                                 SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                     SYNC_FILE_RANGE_WAIT_AFTER) != 0)
    return text_of(errno);
  // Whole pages, rounded outwards: the kernel keeps a partially covered page, and the
  // neighbouring bytes of a page are on the device as well (every write is synced before the
  // next). Advice only: a failure leaves pages cached, which resident_bytes() would show.
  const int64_t page = 4096;
  const int64_t lo = offset / page * page, hi = (offset + bytes + page - 1) / page * page;
  (void)posix_fadvise(fd, lo, hi - lo, POSIX_FADV_DONTNEED);
  return "";
}

std::string pread_all(int fd, char* p, int64_t bytes, int64_t offset) {
  for (int64_t done = 0; done < bytes;) {
    const ssize_t n = ::pread(fd, p + done, static_cast<size_t>(bytes - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return text_of(errno);
    if (n == 0) return "unexpected end of file";
    done += n;
  }
  return "";
}

constexpr int64_t kBlock = OffloadFile::kChecksumBlock;

}  // namespace

OffloadFile::OffloadFile(const std::string& path, int64_t bytes) : path_(path), bytes_(bytes) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  LLM_REQUIRE(fd_ >= 0, "optim.offload = disk: cannot create '", path, "': ", errno_text());
  // No read-ahead: the kernel would pull neighbouring pages into the cache, where nothing drops
  // them (the pager reads ahead itself, into its own staging).
  (void)posix_fadvise(fd_, 0, 0, POSIX_FADV_RANDOM);
  if (bytes > 0) {
    const int rc = posix_fallocate(fd_, 0, bytes);
    if (rc != 0) {
      close_file();
      ::unlink(path.c_str());
      fail(std::string("optim.offload = disk: cannot reserve ") + std::to_string(bytes) +
           " bytes for '" + path + "': " + text_of(rc) +
           " (set optim.offload_dir to a device with room, or optim.offload = none)");
    }
  }
  // The reserved blocks read as zeros.
  const std::vector<char> zeros(static_cast<size_t>(kBlock), 0);
  crcs_.assign(static_cast<size_t>((bytes + kBlock - 1) / kBlock), crc32c(zeros.data(), kBlock));
  if (bytes % kBlock != 0) crcs_.back() = crc32c(zeros.data(), static_cast<size_t>(bytes % kBlock));
  edges_.resize(static_cast<size_t>(2 * kBlock));
}

OffloadFile::~OffloadFile() {
  close_file();
}

OffloadFile::OffloadFile(OffloadFile&& other) noexcept
    : path_(std::move(other.path_)),
      bytes_(other.bytes_),
      fd_(std::exchange(other.fd_, -1)),
      crcs_(std::move(other.crcs_)),
      edges_(std::move(other.edges_)) {}

OffloadFile& OffloadFile::operator=(OffloadFile&& other) noexcept {
  if (this != &other) {
    close_file();
    path_ = std::move(other.path_);
    bytes_ = other.bytes_;
    fd_ = std::exchange(other.fd_, -1);
    crcs_ = std::move(other.crcs_);
    edges_ = std::move(other.edges_);
  }
  return *this;
}

void OffloadFile::rename_to(const std::string& path) {
  LLM_REQUIRE(::rename(path_.c_str(), path.c_str()) == 0, "optim.offload = disk: cannot move '",
              path_, "' to '", path, "': ", errno_text());
  path_ = path;
}

void OffloadFile::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string OffloadFile::read_edges(int64_t offset, int64_t end, int64_t* lo, int64_t* hi) {
  *lo = offset / kBlock * kBlock;
  *hi = std::min((end + kBlock - 1) / kBlock * kBlock, bytes_);
  std::string err;
  if (offset > *lo) err = pread_all(fd_, edges_.data(), offset - *lo, *lo);
  if (err.empty() && *hi > end) err = pread_all(fd_, edges_.data() + kBlock, *hi - end, end);
  return err;
}

uint32_t OffloadFile::block_crc(int64_t block, int64_t offset, int64_t end,
                                const char* data) const {
  const int64_t bs = block * kBlock, be = std::min(bs + kBlock, bytes_);
  uint32_t crc = 0;
  if (bs < offset) crc = crc32c(edges_.data(), static_cast<size_t>(offset - bs), crc);
  const int64_t from = std::max(bs, offset), to = std::min(be, end);
  crc = crc32c(data + (from - offset), static_cast<size_t>(to - from), crc);
  if (be > end) crc = crc32c(edges_.data() + kBlock, static_cast<size_t>(be - end), crc);
  return crc;
}

std::string OffloadFile::read(int64_t offset, int64_t bytes, void* dst, bool* damaged) {
  if (damaged != nullptr) *damaged = false;
  if (bytes <= 0) return "";
  const char* p = static_cast<const char*>(dst);
  std::string err = pread_all(fd_, static_cast<char*>(dst), bytes, offset);
  int64_t lo = 0, hi = 0;
  if (err.empty()) err = read_edges(offset, offset + bytes, &lo, &hi);
  if (!err.empty()) return err;
  for (int64_t b = lo / kBlock; b * kBlock < hi; ++b) {
    const uint32_t got = block_crc(b, offset, offset + bytes, p);
    const uint32_t want = crcs_[static_cast<size_t>(b)];
    if (got == want) continue;
    if (damaged != nullptr) *damaged = true;
    return error_message("bytes [", b * kBlock, ", ", std::min((b + 1) * kBlock, bytes_),
                         ") read back do not match their checksum (", crc32c_text(want),
                         " written, ", crc32c_text(got), " read)");
  }
  return settle(fd_, offset, bytes, false);
}

std::string OffloadFile::write(int64_t offset, int64_t bytes, const void* src) {
  if (bytes <= 0) return "";
  const char* p = static_cast<const char*>(src);
  int64_t lo = 0, hi = 0;
  std::string err = read_edges(offset, offset + bytes, &lo, &hi);
  if (!err.empty()) return err;
  for (int64_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd_, p + done, static_cast<size_t>(bytes - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return text_of(errno);
    done += n;
  }
  for (int64_t b = lo / kBlock; b * kBlock < hi; ++b)
    crcs_[static_cast<size_t>(b)] = block_crc(b, offset, offset + bytes, p);
  return settle(fd_, offset, bytes, true);
}

int64_t OffloadFile::resident_bytes() const {
  if (fd_ < 0 || bytes_ == 0) return 0;
  void* map = ::mmap(nullptr, static_cast<size_t>(bytes_), PROT_READ, MAP_SHARED, fd_, 0);
  if (map == MAP_FAILED) return -1;
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  std::vector<unsigned char> in_core(static_cast<size_t>((bytes_ + page - 1) / page));
  int64_t resident = -1;
  if (::mincore(map, static_cast<size_t>(bytes_), in_core.data()) == 0) {
    resident = 0;
    for (unsigned char c : in_core) resident += (c & 1) ? page : 0;
  }
  ::munmap(map, static_cast<size_t>(bytes_));
  return resident;
}

int64_t OffloadFile::allocated_bytes() const {
  struct stat st {};
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return -1;
  return static_cast<int64_t>(st.st_blocks) * 512;
}

DiskBandwidth offload_probe_bandwidth(const std::string& path, int64_t bytes, int64_t chunk) {
  using Clock = std::chrono::steady_clock;
  DiskBandwidth bw;
  bw.probe_bytes = bytes;
  std::vector<char> buf(static_cast<size_t>(chunk));
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<char>(i * 131 + 7);
  {
    OffloadFile f(path, bytes);
    auto t0 = Clock::now();
    for (int64_t at = 0; at < bytes; at += chunk) {
      const std::string err = f.write(at, std::min(chunk, bytes - at), buf.data());
      LLM_REQUIRE(err.empty(), "optim.offload = disk: writing '", path, "': ", err);
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    bw.write_mb_s = static_cast<double>(bytes) / 1e6 / std::max(s, 1e-9);
    t0 = Clock::now();
    for (int64_t at = 0; at < bytes; at += chunk) {
      const std::string err = f.read(at, std::min(chunk, bytes - at), buf.data());
      LLM_REQUIRE(err.empty(), "optim.offload = disk: reading '", path, "': ", err);
    }
    s = std::chrono::duration<double>(Clock::now() - t0).count();
    bw.read_mb_s = static_cast<double>(bytes) / 1e6 / std::max(s, 1e-9);
  }
  ::unlink(path.c_str());
  return bw;
}

}  // namespace ledgerlm
