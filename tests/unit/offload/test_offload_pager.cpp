// The offload pager on its own: paged buffers round-trip through their files; repeated "steps"
// of read-modify-write passes over a buffer several times the staging arena (each byte staged
// more than three times per step, read twice per step as LAMB's two passes do) against the same
// arithmetic on a RAM copy, with a slow device so that read-ahead, write-behind and reuse
// overlap; ranges that overlap earlier ones; a write that fails as a full disk does; a byte of a
// file changed behind the pager's back (its checksums); a second pager on the same files (the
// lock), and the ranks' pagers beside each other.
// Exact equality throughout: the pager moves bytes, it computes nothing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "model/base/check.h"
#include "tests/support/data_test_support.h"
#include "train/offload/offload_pager.h"

namespace ledgerlm {
namespace {

using testing::TempDir;

// Sets an environment variable for one scope (the pager reads its test knobs when it starts).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }

 private:
  const char* name_;
};

// One pass: x = x * 3 + pass + step over every float of [begin, begin + n), in pieces of `piece`.
void pass_paged(OffloadPager& pager, float* base, int64_t n, int64_t piece, int step, int pass) {
  for (int64_t b = 0; b < n; b += piece) {
    const int64_t k = std::min(piece, n - b);
    auto* x = static_cast<float*>(pager.acquire(base + b, k * 4, OffloadPager::Access::kReadWrite));
    for (int64_t i = 0; i < k; ++i) x[i] = x[i] * 3.0f + static_cast<float>(pass + step);
    pager.release(base + b, k * 4, true);
  }
}

void pass_ram(std::vector<float>& v, int step, int pass) {
  for (float& x : v) x = x * 3.0f + static_cast<float>(pass + step);
}

// The buffer's values, read in pieces of 1024 floats (other bounds than the passes used).
std::vector<float> read_all(OffloadPager& pager, float* base, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 1024) {
    const int64_t k = std::min<int64_t>(1024, n - b);
    auto* x =
        static_cast<const float*>(pager.acquire(base + b, k * 4, OffloadPager::Access::kRead));
    std::memcpy(out.data() + b, x, static_cast<size_t>(k * 4));
    pager.release(base + b, k * 4, false);
  }
  return out;
}

int64_t first_mismatch(const std::vector<float>& a, const std::vector<float>& b) {
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return static_cast<int64_t>(i);
  return -1;
}

TEST(OffloadPager, StepsOverABufferLargerThanTheArenaMatchRam) {
  TempDir dir("ledgerlm_pager_");
  // A slow device (2 ms per read): the read-ahead of later pieces is still in flight when the
  // step reaches them, and write-behinds queue behind reads.
  ScopedEnv slow("LEDGERLM_OFFLOAD_TEST_READ_DELAY_US", "2000");
  MemoryTracker tracker;
  const int64_t arena = 64 << 10, n = 60000, piece = 4096;  // 240 KB of floats, 16 KB pieces
  OffloadPager pager(dir.file("state"), "rank0", arena, &tracker);
  auto* base = static_cast<float*>(pager.add_region("optim.m", MemTag::kOptimM, n * 4));
  // Initial values through kWrite ranges (nothing read from the file).
  std::vector<float> ram(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += piece) {
    const int64_t k = std::min(piece, n - b);
    auto* x = static_cast<float*>(pager.acquire(base + b, k * 4, OffloadPager::Access::kWrite));
    for (int64_t i = 0; i < k; ++i) x[i] = ram[static_cast<size_t>(b + i)] = 0.5f * (b + i);
    pager.release(base + b, k * 4, true);
  }
  for (int step = 1; step <= 4; ++step) {
    pager.step_begin();
    for (int pass = 0; pass < 2; ++pass) {  // two passes per step, as LAMB's
      pass_paged(pager, base, n, piece, step, pass);
      pass_ram(ram, step, pass);
    }
    pager.step_end();
  }
  pager.flush();
  const OffloadStats st = pager.stats();
  // Each step reads the buffer twice (it is 3.7x the arena, so nothing survives a pass).
  EXPECT_GE(st.bytes_read, 4 * 2 * n * 4) << "each piece must come from the file every pass";
  EXPECT_GT(st.prefetched, 0) << "steps 2-4 follow step 1's trace: some pieces were read ahead";
  const std::vector<float> got = read_all(pager, base, n);
  const int64_t bad = first_mismatch(got, ram);
  EXPECT_EQ(bad, -1) << "element " << bad << ": paged " << got[static_cast<size_t>(bad)] << ", RAM "
                     << ram[static_cast<size_t>(bad)];
  // Nothing of the file stays in the page cache (ranges are dropped after every read/write).
  for (const OffloadRegionInfo& r : pager.regions()) {
    EXPECT_EQ(r.bytes, n * 4);
    EXPECT_EQ(r.resident, 0) << r.path << " has page-cached bytes";
  }
}

TEST(OffloadPager, OverlappingRangesSeeEachOthersWrites) {
  TempDir dir("ledgerlm_pager_");
  MemoryTracker tracker;
  OffloadPager pager(dir.file("state"), "rank0", 1 << 20, &tracker);
  auto* base = static_cast<float*>(pager.add_region("master", MemTag::kMaster, 4096 * 4));
  // [0, 3000) written, then [1000, 4096) read-modified (overlapping it), then the whole read.
  auto* a = static_cast<float*>(pager.acquire(base, 3000 * 4, OffloadPager::Access::kWrite));
  for (int i = 0; i < 3000; ++i) a[i] = static_cast<float>(i);
  pager.release(base, 3000 * 4, true);
  auto* b =
      static_cast<float*>(pager.acquire(base + 1000, 3096 * 4, OffloadPager::Access::kReadWrite));
  for (int i = 0; i < 3096; ++i) b[i] += 1.0f;
  pager.release(base + 1000, 3096 * 4, true);
  const std::vector<float> got = read_all(pager, base, 4096);
  for (int i = 0; i < 4096; ++i) {
    const float want = (i < 3000 ? static_cast<float>(i) : 0.0f) + (i >= 1000 ? 1.0f : 0.0f);
    ASSERT_EQ(got[static_cast<size_t>(i)], want) << "element " << i;
  }
}

TEST(OffloadPager, AFailedWriteIsOneErrorNamingTheFile) {
  TempDir dir("ledgerlm_pager_");
  ScopedEnv full("LEDGERLM_OFFLOAD_TEST_FAIL_WRITE", "3");  // the third write: "disk full"
  MemoryTracker tracker;
  OffloadPager pager(dir.file("state"), "rank0", 64 << 10, &tracker);
  auto* base = static_cast<float*>(pager.add_region("optim.v", MemTag::kOptimV, 16384 * 4));
  std::string message;
  try {
    for (int rep = 0; rep < 4; ++rep) pass_paged(pager, base, 16384, 2048, 1, rep);
    pager.flush();
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("No space left on device"), std::string::npos) << message;
  EXPECT_NE(message.find("rank0.optim.v.bin"), std::string::npos) << message;
  EXPECT_NE(message.find("last checkpoint is intact"), std::string::npos) << message;
}

TEST(OffloadPager, FilesAreReservedAtStartAndRemovedAtTheEnd) {
  TempDir dir("ledgerlm_pager_");
  MemoryTracker tracker;
  std::string path;
  {
    OffloadPager pager(dir.file("state"), "rank1", 64 << 10, &tracker);
    pager.add_region("optim.codes", MemTag::kOptimCodes, 1 << 20);
    const auto regions = pager.regions();
    ASSERT_EQ(regions.size(), 1u);
    path = regions[0].path;
    EXPECT_GE(regions[0].allocated, 1 << 20) << "blocks reserved up front (posix_fallocate)";
    EXPECT_EQ(tracker.usage(MemTag::kOffloadStaging).current, 64 << 10);
  }
  EXPECT_FALSE(std::filesystem::exists(path)) << "the state files are scratch";
  EXPECT_EQ(tracker.usage(MemTag::kOffloadStaging).current, 0);
}

// Ranges read back in pieces of 1000 floats (4000 bytes: they start and end inside 4 KiB
// checksum blocks, so each read also checks the neighbouring bytes of its edge blocks).
void read_unaligned(OffloadPager& pager, float* base, int64_t n) {
  for (int64_t b = 0; b < n; b += 1000) {
    const int64_t k = std::min<int64_t>(1000, n - b);
    pager.acquire(base + b, k * 4, OffloadPager::Access::kRead);
    pager.release(base + b, k * 4, false);
  }
}

TEST(OffloadPager, AByteChangedInAFileIsAnErrorNamingTheFile) {
  TempDir dir("ledgerlm_pager_");
  MemoryTracker tracker;
  const int64_t n = 60000;  // 240 KB, 3.7x the arena: what was written is read from the file
  OffloadPager pager(dir.file("state"), "rank0", 64 << 10, &tracker);
  auto* base = static_cast<float*>(pager.add_region("optim.m", MemTag::kOptimM, n * 4));
  pass_paged(pager, base, n, 3000, 1, 0);  // every byte written, in unaligned pieces
  pager.flush();
  read_unaligned(pager, base, n);  // intact: every block matches
  // The device changes one byte (in the middle of a block, which reads start and end inside).
  const std::string path = pager.regions().at(0).path;
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0) << path;
  const off_t at = 4096 * 3 + 1234;
  unsigned char c = 0;
  ASSERT_EQ(::pread(fd, &c, 1, at), 1);
  c ^= 0x01;
  ASSERT_EQ(::pwrite(fd, &c, 1, at), 1);
  ::close(fd);
  std::string message;
  try {
    read_unaligned(pager, base, n);
  } catch (const Error& e) {
    message = e.what();
  }
  EXPECT_NE(message.find("'" + path + "' is damaged"), std::string::npos) << message;
  EXPECT_NE(message.find("bytes [12288, 16384)"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << "one line: " << message;
}

TEST(OffloadPager, ASecondPagerOnTheSameFilesIsRefusedNamingTheHolder) {
  TempDir dir("ledgerlm_pager_");
  MemoryTracker tracker;
  const std::string state = dir.file("state");
  {
    OffloadPager first(state, "rank0", 64 << 10, &tracker);
    auto* base = static_cast<float*>(first.add_region("master", MemTag::kMaster, 4096 * 4));
    pass_paged(first, base, 4096, 1024, 1, 0);
    first.flush();
    // Another job's rank 0 there would truncate and overwrite these files.
    std::string message;
    try {
      OffloadPager second(state, "rank0", 64 << 10, &tracker);
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_NE(message.find("is in use by pid " + std::to_string(::getpid())), std::string::npos)
        << message;
    EXPECT_NE(message.find(state), std::string::npos) << message;
    // The refused pager created nothing: the first one's values are intact.
    std::vector<float> ram(4096);
    for (size_t i = 0; i < ram.size(); ++i) ram[i] = 1.0f;
    EXPECT_EQ(first_mismatch(read_all(first, base, 4096), ram), -1);
    // Another rank of the same job locks its own prefix beside it.
    OffloadPager rank1(state, "rank1", 64 << 10, &tracker);
    rank1.add_region("master", MemTag::kMaster, 4096 * 4);
  }
  // Once the holder has ended, the next job takes the directory, which it left empty.
  EXPECT_FALSE(std::filesystem::exists(state)) << "files and locks removed with their pagers";
  OffloadPager next(state, "rank0", 64 << 10, &tracker);
}

TEST(OffloadPager, RanksSharingADirectoryProbeTheDeviceApart) {
  TempDir dir("ledgerlm_pager_");
  MemoryTracker tracker;
  OffloadPager rank0(dir.file("state"), "rank0", 64 << 10, &tracker);
  OffloadPager rank1(dir.file("state"), "rank1", 64 << 10, &tracker);
  // Two ranks of one host probing at once, as they do at start-up, several times over.
  for (int rep = 0; rep < 4; ++rep) {
    std::string err0, err1;
    std::thread other([&] {
      try {
        rank1.probe_bandwidth(4 << 20, 16 << 10);
      } catch (const Error& e) {
        err1 = e.what();
      }
    });
    try {
      rank0.probe_bandwidth(4 << 20, 16 << 10);
    } catch (const Error& e) {
      err0 = e.what();
    }
    other.join();
    EXPECT_EQ(err0, "");
    EXPECT_EQ(err1, "");
  }
}

}  // namespace
}  // namespace ledgerlm
