// The pager behind optim.offload = disk: buffers whose bytes live in files (the fp32 master and
// the optimizer state), reached through a bounded staging arena in RAM.
//
// A paged buffer has an address like any other (a reserved, inaccessible range of virtual memory:
// no RAM, and a stray access faults at once), so the optimizers build their kernels' arguments
// exactly as they do for RAM. The offload backend (offload_backend.h) hands every range a kernel
// is about to touch to acquire(), which returns where the bytes are staged, and release()s it
// after. Staged ranges stay resident (least recently used evicted first), so the passes of a
// multi-pass optimizer (LAMB, Adafactor) over the same tensor hit while the arena holds it.
//
// Overlap with compute: one I/O thread serves a FIFO of reads and writes, so a read queued after
// a write of the same bytes sees them. A dirty range is queued for writing when it is released
// (write-behind: the step goes on while it is written). Read-ahead follows the previous step's
// order of requests (the trace): a step requests the same ranges in the same order every time,
// so while one range is being used the next ones in the trace are read into free staging space.
// Where the order differs (the first step, a changed optimizer path) requests are served
// synchronously until the next step; results never depend on the prefetch.
//
// Two environment variables exist for the tests: LEDGERLM_OFFLOAD_TEST_READ_DELAY_US delays every
// read (a slow device, so that ordering bugs between prefetch, write-behind and use would show)
// and LEDGERLM_OFFLOAD_TEST_FAIL_WRITE=N makes the N-th write fail as a full disk does;
// LEDGERLM_OFFLOAD_TEST_DAMAGE_WRITE=N flips a bit of the N-th write's first byte in the file
// after it is written, as a failing device would (offload_file.h: the next read of it fails its
// checksum).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/base/memory.h"
#include "train/offload/offload_file.h"
#include "train/offload/offload_lock.h"

namespace ledgerlm {

struct OffloadStats {
  int64_t bytes_read = 0, bytes_written = 0;
  int64_t reads = 0, writes = 0;
  int64_t hits = 0, misses = 0, prefetched = 0;
  double read_s = 0.0, write_s = 0.0;  // the I/O thread's time in reads and writes
  double stall_s = 0.0;                // time the caller waited for I/O
};

// One paged buffer as the ledger reports it.
struct OffloadRegionInfo {
  std::string name, path;
  MemTag tag = MemTag::kOther;
  int64_t bytes = 0;
  int64_t allocated = 0;  // on the device (st_blocks)
  int64_t resident = 0;   // in the page cache now (mincore), -1 unknown
};

class OffloadPager {
 public:
  enum class Access { kRead, kWrite, kReadWrite };  // kWrite: every byte overwritten, none read

  // Files are created in `dir` as PREFIX.NAME.bin, after PREFIX.lock there is taken (throws
  // Error naming the holder when another process has it: offload_lock.h); the arena holds
  // `staging_bytes`.
  OffloadPager(const std::string& dir, const std::string& prefix, int64_t staging_bytes,
               MemoryTracker* tracker);
  ~OffloadPager();
  OffloadPager(const OffloadPager&) = delete;
  OffloadPager& operator=(const OffloadPager&) = delete;

  // A paged buffer of `bytes` (zero-filled) backed by a new file; returns its address.
  void* add_region(const std::string& name, MemTag tag, int64_t bytes);
  void remove_region(void* base);
  // True when [p, p + 1) lies in a paged buffer.
  bool contains(const void* p) const;

  // Stages [addr, addr + bytes) (inside one paged buffer) and returns its staged address, valid
  // until release(addr, bytes, ...). Throws Error on an I/O failure or when the arena cannot
  // hold the ranges pinned together.
  void* acquire(const void* addr, int64_t bytes, Access access);
  void release(const void* addr, int64_t bytes, bool dirty);
  // Waits until every queued read and write has finished (errors thrown).
  void flush();

  // The requests between step_begin and step_end form the trace the next step reads ahead by.
  void step_begin();
  void step_end();

  // Moves every file into `dir` (same filesystem; open descriptors stay valid) and removes the
  // old directory if it is empty: a run's files are created before its directory exists.
  void relocate(const std::string& dir);

  // The device's sequential bandwidth under dir(), measured with a scratch file of this pager's
  // own (PREFIX.bandwidth_probe, under its lock: ranks sharing the directory probe apart).
  DiskBandwidth probe_bandwidth(int64_t bytes, int64_t chunk) const;

  OffloadStats stats() const;
  std::vector<OffloadRegionInfo> regions() const;
  int64_t staging_bytes() const { return arena_bytes_; }
  const std::string& dir() const { return dir_; }

 private:
  struct Region {
    std::string name;
    MemTag tag = MemTag::kOther;
    char* base = nullptr;
    int64_t bytes = 0, reserved = 0;
    std::unique_ptr<OffloadFile> file;
  };
  enum class State { kReading, kReady, kWriting };
  struct Entry {
    bool alive = false;
    int region = -1;
    int64_t off = 0, bytes = 0, arena_off = 0, arena_bytes = 0;
    State state = State::kReady;
    int pins = 0;
    bool requeue = false;  // released dirty while a write was in flight: write again
    bool unused_prefetch = false;
    uint64_t last_use = 0;
  };
  struct Request {
    int region = -1;
    int64_t off = 0, bytes = 0;
    Access access = Access::kRead;
  };
  struct Job {
    int entry = -1;
    bool write = false;
  };

  int region_of(const void* p) const;
  int find_exact(int region, int64_t off, int64_t bytes) const;
  // Removes entries overlapping the range without being it (waits for their I/O first).
  void drop_overlaps(std::unique_lock<std::mutex>& lock, int region, int64_t off, int64_t bytes);
  // Arena space for `bytes`, evicting clean unpinned entries; `wait`: also wait for I/O to free
  // entries. -1 when none.
  int64_t arena_alloc(std::unique_lock<std::mutex>& lock, int64_t bytes, bool wait,
                      bool evict_prefetched);
  int64_t first_fit(int64_t bytes) const;
  int new_entry(int region, int64_t off, int64_t bytes, int64_t arena_off, int64_t arena_bytes);
  void free_entry(int id);
  void queue(int entry, bool write);
  void wait_ready(std::unique_lock<std::mutex>& lock, int id);
  void prefetch_after(std::unique_lock<std::mutex>& lock, size_t next);
  void throw_if_failed() const;
  void io_loop();

  std::string dir_, prefix_;
  std::unique_ptr<OffloadLock> lock_;
  std::vector<Region> regions_;
  Buffer arena_;
  char* arena_data_ = nullptr;
  int64_t arena_bytes_ = 0;
  std::map<int64_t, int> arena_map_;                // arena offset -> entry
  std::vector<std::map<int64_t, int>> region_map_;  // per region: offset -> entry
  std::vector<Entry> entries_;
  std::vector<int> free_ids_;
  uint64_t clock_ = 0;

  std::vector<Request> trace_, recording_;
  bool in_step_ = false, trace_ok_ = false;
  size_t trace_at_ = 0;

  mutable std::mutex mutex_;
  std::condition_variable io_wake_, done_;
  std::deque<Job> jobs_;
  int busy_ = 0;  // jobs taken by the I/O thread and not finished
  bool stop_ = false;
  std::string error_;
  OffloadStats stats_;
  int64_t read_delay_us_ = 0, fail_write_at_ = -1, damage_write_at_ = -1, writes_seen_ = 0;
  std::thread io_;
};

}  // namespace ledgerlm
