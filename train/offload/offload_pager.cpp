// OffloadPager (see offload_pager.h): the staging arena, its entries and the I/O thread.
#include "train/offload/offload_pager.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "model/base/check.h"
#include "model/base/subnormals.h"

namespace ledgerlm {
namespace {

using Clock = std::chrono::steady_clock;
// Staged ranges start on a cache line (what the vector kernels want); files are read and written
// at exact byte ranges, so nothing larger is needed, and small tensors (biases, norms) pack.
constexpr int64_t kAlign = 64;

int64_t round_up(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoll(v) : fallback;
}

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// LEDGERLM_OFFLOAD_TEST_DAMAGE_WRITE: the device changes a byte behind the pager's back (through
// a descriptor of its own, so the file's checksums do not see it).
void damage_byte(const std::string& path, int64_t offset) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;
  unsigned char c = 0;
  if (::pread(fd, &c, 1, offset) == 1) {
    c ^= 0x10;
    if (::pwrite(fd, &c, 1, offset) != 1) std::perror("damage_byte");
  }
  ::close(fd);
}

}  // namespace

OffloadPager::OffloadPager(const std::string& dir, const std::string& prefix, int64_t staging_bytes,
                           MemoryTracker* tracker)
    : dir_(dir), prefix_(prefix) {
  // Before any file is created (or truncated): it creates the directory too.
  lock_ = std::make_unique<OffloadLock>(dir + "/" + prefix + ".lock");
  arena_bytes_ = round_up(std::max<int64_t>(staging_bytes, kAlign), kAlign);
  arena_ = Buffer(tracker, MemTag::kOffloadStaging, static_cast<size_t>(arena_bytes_));
  arena_data_ = arena_.as<char>();
  read_delay_us_ = env_int("LEDGERLM_OFFLOAD_TEST_READ_DELAY_US", 0);
  fail_write_at_ = env_int("LEDGERLM_OFFLOAD_TEST_FAIL_WRITE", -1);
  damage_write_at_ = env_int("LEDGERLM_OFFLOAD_TEST_DAMAGE_WRITE", -1);
  io_ = std::thread([this] { io_loop(); });
}

OffloadPager::~OffloadPager() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  io_wake_.notify_all();
  io_.join();
  // The files are scratch (checkpoints hold the state): they go with the run's process.
  for (Region& r : regions_) {
    if (r.base == nullptr) continue;
    ::munmap(r.base, static_cast<size_t>(r.reserved));
    if (r.file) ::unlink(r.file->path().c_str());
  }
  lock_.reset();  // the files are gone: another job may take the directory now
  std::error_code ec;
  std::filesystem::remove(dir_, ec);  // when empty
}

void* OffloadPager::add_region(const std::string& name, MemTag tag, int64_t bytes) {
  Region r;
  r.name = name;
  r.tag = tag;
  r.bytes = bytes;
  r.reserved = round_up(std::max<int64_t>(bytes, 1), kAlign);
  // Address space only: no RAM behind it, and any access faults.
  void* base = ::mmap(nullptr, static_cast<size_t>(r.reserved), PROT_NONE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  LLM_REQUIRE(base != MAP_FAILED, "optim.offload = disk: cannot reserve address space for ", name,
              ": ", errno_text());
  r.base = static_cast<char*>(base);
  const std::string path = dir_ + "/" + prefix_ + "." + name + ".bin";
  try {
    r.file = std::make_unique<OffloadFile>(path, bytes);
  } catch (...) {
    ::munmap(base, static_cast<size_t>(r.reserved));
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  regions_.push_back(std::move(r));
  region_map_.emplace_back();
  return base;
}

void OffloadPager::remove_region(void* base) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int id = region_of(base);
  LLM_ASSERT(id >= 0, "remove_region: not a paged buffer");
  // Wait for its I/O, then forget its entries: the bytes are no longer wanted.
  for (auto it = region_map_[static_cast<size_t>(id)].begin();
       it != region_map_[static_cast<size_t>(id)].end();) {
    const int e = it->second;
    ++it;
    // (A range may still be pinned when a step was abandoned by an error: the buffer goes.)
    done_.wait(lock, [&] { return entries_[static_cast<size_t>(e)].state == State::kReady; });
    free_entry(e);
  }
  Region& r = regions_[static_cast<size_t>(id)];
  ::munmap(r.base, static_cast<size_t>(r.reserved));
  if (r.file) ::unlink(r.file->path().c_str());
  r.file.reset();
  r.base = nullptr;
}

int OffloadPager::region_of(const void* p) const {
  const char* c = static_cast<const char*>(p);
  for (size_t i = 0; i < regions_.size(); ++i) {
    const Region& r = regions_[i];
    if (r.base != nullptr && c >= r.base && c < r.base + r.reserved) return static_cast<int>(i);
  }
  return -1;
}

bool OffloadPager::contains(const void* p) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return p != nullptr && region_of(p) >= 0;
}

int OffloadPager::find_exact(int region, int64_t off, int64_t bytes) const {
  const auto& m = region_map_[static_cast<size_t>(region)];
  const auto it = m.find(off);
  if (it == m.end()) return -1;
  return entries_[static_cast<size_t>(it->second)].bytes == bytes ? it->second : -1;
}

void OffloadPager::wait_ready(std::unique_lock<std::mutex>& lock, int id) {
  const auto ready = [&] { return entries_[static_cast<size_t>(id)].state == State::kReady; };
  if (ready()) return;
  const auto t0 = Clock::now();
  done_.wait(lock, [&] { return ready() || !error_.empty(); });
  stats_.stall_s += seconds_since(t0);
  throw_if_failed();
}

void OffloadPager::drop_overlaps(std::unique_lock<std::mutex>& lock, int region, int64_t off,
                                 int64_t bytes) {
  auto& m = region_map_[static_cast<size_t>(region)];
  for (;;) {
    int victim = -1;
    auto it = m.lower_bound(off + bytes);
    while (it != m.begin()) {
      --it;
      const Entry& e = entries_[static_cast<size_t>(it->second)];
      if (e.off + e.bytes <= off) break;  // entries do not overlap each other: none further left
      if (!(e.off == off && e.bytes == bytes)) {
        victim = it->second;
        break;
      }
    }
    if (victim < 0) return;
    LLM_ASSERT(entries_[static_cast<size_t>(victim)].pins == 0,
               "offload: two ranges in use together overlap");
    wait_ready(lock, victim);
    free_entry(victim);
  }
}

int64_t OffloadPager::first_fit(int64_t bytes) const {
  int64_t at = 0;
  for (const auto& [off, id] : arena_map_) {
    if (off - at >= bytes) return at;
    at = off + entries_[static_cast<size_t>(id)].arena_bytes;
  }
  return arena_bytes_ - at >= bytes ? at : -1;
}

int64_t OffloadPager::arena_alloc(std::unique_lock<std::mutex>& lock, int64_t bytes, bool wait,
                                  bool evict_prefetched) {
  for (;;) {
    const int64_t at = first_fit(bytes);
    if (at >= 0) return at;
    // Evict the least recently used clean, unpinned entry.
    int victim = -1;
    bool pending = false;
    for (const auto& [off, id] : arena_map_) {
      const Entry& e = entries_[static_cast<size_t>(id)];
      if (e.pins > 0) continue;
      if (e.state != State::kReady) {
        pending = true;
        continue;
      }
      if (e.unused_prefetch && !evict_prefetched) continue;
      if (victim < 0 || e.last_use < entries_[static_cast<size_t>(victim)].last_use) victim = id;
    }
    if (victim >= 0) {
      free_entry(victim);
      continue;
    }
    if (!wait || !pending) return -1;
    const auto t0 = Clock::now();
    const int before = busy_ + static_cast<int>(jobs_.size());
    done_.wait(lock,
               [&] { return busy_ + static_cast<int>(jobs_.size()) < before || !error_.empty(); });
    stats_.stall_s += seconds_since(t0);
    throw_if_failed();
  }
}

int OffloadPager::new_entry(int region, int64_t off, int64_t bytes, int64_t arena_off,
                            int64_t arena_bytes) {
  int id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<int>(entries_.size());
    entries_.emplace_back();
  }
  Entry& e = entries_[static_cast<size_t>(id)];
  e = Entry{};
  e.alive = true;
  e.region = region;
  e.off = off;
  e.bytes = bytes;
  e.arena_off = arena_off;
  e.arena_bytes = arena_bytes;
  e.last_use = ++clock_;
  arena_map_[arena_off] = id;
  region_map_[static_cast<size_t>(region)][off] = id;
  return id;
}

void OffloadPager::free_entry(int id) {
  Entry& e = entries_[static_cast<size_t>(id)];
  arena_map_.erase(e.arena_off);
  region_map_[static_cast<size_t>(e.region)].erase(e.off);
  e.alive = false;
  free_ids_.push_back(id);
}

void OffloadPager::queue(int entry, bool write) {
  entries_[static_cast<size_t>(entry)].state = write ? State::kWriting : State::kReading;
  jobs_.push_back({entry, write});
  io_wake_.notify_one();
}

void OffloadPager::throw_if_failed() const {
  if (!error_.empty()) fail(error_);
}

void* OffloadPager::acquire(const void* addr, int64_t bytes, Access access) {
  std::unique_lock<std::mutex> lock(mutex_);
  throw_if_failed();
  const int region = region_of(addr);
  LLM_ASSERT(region >= 0, "offload: acquire outside the paged buffers");
  const Region& r = regions_[static_cast<size_t>(region)];
  const int64_t off = static_cast<const char*>(addr) - r.base;
  LLM_ASSERT(off >= 0 && off + bytes <= r.bytes, "offload: range past the end of ", r.name);

  bool follow = false;
  size_t index = 0;
  if (in_step_) {  // follow the trace; read ahead of it while it holds
    index = recording_.size();
    recording_.push_back({region, off, bytes, access});
    if (trace_ok_) {
      const Request* t = index < trace_.size() ? &trace_[index] : nullptr;
      trace_ok_ = t != nullptr && t->region == region && t->off == off && t->bytes == bytes;
    }
    follow = trace_ok_;
  }

  int id = find_exact(region, off, bytes);
  if (id >= 0) {
    ++stats_.hits;
    if (entries_[static_cast<size_t>(id)].unused_prefetch) ++stats_.prefetched;
  } else {
    ++stats_.misses;
    drop_overlaps(lock, region, off, bytes);
    const int64_t need = round_up(bytes, kAlign);
    const int64_t at = arena_alloc(lock, need, true, true);
    LLM_REQUIRE(at >= 0, "optim.offload_staging_mb: the staging arena (", arena_bytes_,
                " bytes) cannot hold the ranges one optimizer kernel needs together (", need,
                " bytes more for ", r.name, "); raise optim.offload_staging_mb");
    id = new_entry(region, off, bytes, at, need);
    if (access != Access::kWrite) queue(id, false);
  }
  {
    Entry& e = entries_[static_cast<size_t>(id)];
    e.unused_prefetch = false;
    e.last_use = ++clock_;
    ++e.pins;  // pinned before reading ahead, so the read-ahead cannot evict it
  }
  if (follow) prefetch_after(lock, index + 1);
  wait_ready(lock, id);
  return arena_data_ + entries_[static_cast<size_t>(id)].arena_off;
}

void OffloadPager::release(const void* addr, int64_t bytes, bool dirty) {
  std::unique_lock<std::mutex> lock(mutex_);
  const int region = region_of(addr);
  LLM_ASSERT(region >= 0, "offload: release outside the paged buffers");
  const int64_t off = static_cast<const char*>(addr) - regions_[static_cast<size_t>(region)].base;
  const int id = find_exact(region, off, bytes);
  LLM_ASSERT(id >= 0, "offload: release of a range not acquired (",
             regions_[static_cast<size_t>(region)].name, " at ", off, ", ", bytes, " bytes)");
  Entry& e = entries_[static_cast<size_t>(id)];
  LLM_ASSERT(e.pins > 0, "offload: release without acquire");
  --e.pins;
  if (dirty) e.requeue = true;
  // Write-behind: queued once nobody holds it (an op holding a range twice releases it twice).
  if (e.pins == 0 && e.requeue) {
    e.requeue = false;
    queue(id, true);
  }
}

void OffloadPager::prefetch_after(std::unique_lock<std::mutex>& lock, size_t next) {
  // Read ahead while the staged-but-unused ranges stay within half the arena.
  int64_t ahead = 0;
  for (size_t i = next; i < trace_.size() && ahead < arena_bytes_ / 2; ++i) {
    const Request& t = trace_[i];
    const int64_t need = round_up(t.bytes, kAlign);
    ahead += need;
    if (find_exact(t.region, t.off, t.bytes) >= 0) continue;
    // Overlapping staged ranges would need their I/O first: leave those to the request.
    const auto& m = region_map_[static_cast<size_t>(t.region)];
    auto it = m.lower_bound(t.off + t.bytes);
    if (it != m.begin()) {
      --it;
      const Entry& e = entries_[static_cast<size_t>(it->second)];
      if (e.off + e.bytes > t.off) break;
    }
    const int64_t at = arena_alloc(lock, need, false, false);
    if (at < 0) break;
    const int id = new_entry(t.region, t.off, t.bytes, at, need);
    entries_[static_cast<size_t>(id)].unused_prefetch = true;
    if (t.access == Access::kWrite) continue;  // nothing to read
    queue(id, false);
  }
}

void OffloadPager::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto t0 = Clock::now();
  done_.wait(lock, [&] { return (jobs_.empty() && busy_ == 0) || !error_.empty(); });
  stats_.stall_s += seconds_since(t0);
  throw_if_failed();
}

void OffloadPager::step_begin() {
  std::lock_guard<std::mutex> lock(mutex_);
  in_step_ = true;
  recording_.clear();
  trace_ok_ = !trace_.empty();
}

void OffloadPager::step_end() {
  std::lock_guard<std::mutex> lock(mutex_);
  in_step_ = false;
  trace_.swap(recording_);
  recording_.clear();
}

void OffloadPager::relocate(const std::string& dir) {
  flush();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  LLM_REQUIRE(!ec, "optim.offload = disk: cannot create '", dir, "': ", ec.message());
  std::lock_guard<std::mutex> lock(mutex_);
  lock_->rename_to(dir + "/" + prefix_ + ".lock");  // still held: the files follow it
  for (Region& r : regions_)
    if (r.file) r.file->rename_to(dir + "/" + prefix_ + "." + r.name + ".bin");
  std::filesystem::remove(dir_, ec);  // only when empty (other ranks' files may remain)
  dir_ = dir;
}

DiskBandwidth OffloadPager::probe_bandwidth(int64_t bytes, int64_t chunk) const {
  return offload_probe_bandwidth(dir_ + "/" + prefix_ + ".bandwidth_probe", bytes, chunk);
}

OffloadStats OffloadPager::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

std::vector<OffloadRegionInfo> OffloadPager::regions() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<OffloadRegionInfo> out;
  for (const Region& r : regions_) {
    if (r.base == nullptr) continue;
    out.push_back({r.name, r.file->path(), r.tag, r.bytes, r.file->allocated_bytes(),
                   r.file->resident_bytes()});
  }
  return out;
}

void OffloadPager::io_loop() {
  subnormals_adopt();  // precision.subnormals, like every thread that computes (subnormals.h)
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    io_wake_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    const Job job = jobs_.front();
    jobs_.pop_front();
    ++busy_;
    // Copies: entries_ may grow (and move) while the lock is released.
    const Entry& job_entry = entries_[static_cast<size_t>(job.entry)];
    OffloadFile& file = *regions_[static_cast<size_t>(job_entry.region)].file;
    const int64_t off = job_entry.off, bytes = job_entry.bytes;
    char* staged = arena_data_ + job_entry.arena_off;
    if (job.write) ++writes_seen_;
    const bool fail_now = job.write && fail_write_at_ > 0 && writes_seen_ == fail_write_at_;
    const bool damage_now = job.write && damage_write_at_ > 0 && writes_seen_ == damage_write_at_;
    lock.unlock();
    const auto t0 = Clock::now();
    std::string err;
    bool damaged = false;
    if (job.write) {
      err = fail_now ? std::strerror(ENOSPC) : file.write(off, bytes, staged);
      if (err.empty() && damage_now) damage_byte(file.path(), off);
    } else {
      if (read_delay_us_ > 0)
        std::this_thread::sleep_for(std::chrono::microseconds(read_delay_us_));
      err = file.read(off, bytes, staged, &damaged);
    }
    const double s = seconds_since(t0);
    lock.lock();
    --busy_;
    if (job.write) {
      stats_.write_s += s;
      stats_.bytes_written += bytes;
      ++stats_.writes;
    } else {
      stats_.read_s += s;
      stats_.bytes_read += bytes;
      ++stats_.reads;
    }
    if (damaged && error_.empty())
      error_ = "optim.offload = disk: '" + file.path() + "' is damaged: " + err +
               " (the device returned other bytes than were written to it; the last checkpoint "
               "is intact: check the device or set optim.offload_dir to another, then --resume "
               "auto)";
    if (!err.empty() && error_.empty())
      error_ = std::string("optim.offload = disk: ") + (job.write ? "writing " : "reading ") +
               std::to_string(bytes) + " bytes of '" + file.path() + "' failed: " + err +
               " (the last checkpoint is intact; free space or set optim.offload_dir, then "
               "--resume auto)";
    entries_[static_cast<size_t>(job.entry)].state = State::kReady;
    done_.notify_all();
  }
}

}  // namespace ledgerlm
