// The guard backend (see guard_backend.h): a ForwardingBackend over the CPU backend whose
// allocator maps every buffer PROT_NONE and opens all of them for the duration of each op.
#include "model/backend/guard/guard_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <mutex>

#include "model/backend/wrap/forwarding_backend.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

class GuardAllocator final : public Allocator {
 public:
  MemSpace space() const override { return MemSpace::kDevice; }

  void* allocate(size_t bytes) override {
    const size_t len = round_to_pages(bytes);
    void* p = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;  // anonymous mappings are zero-filled
    std::lock_guard<std::mutex> lock(mutex_);
    regions_[p] = len;
    if (open_ == 0) protect(p, len, PROT_NONE);
    return p;
  }

  void deallocate(void* data, size_t bytes) override {
    std::lock_guard<std::mutex> lock(mutex_);
    regions_.erase(data);
    ::munmap(data, round_to_pages(bytes));
  }

  // Opens every buffer for reading and writing while a backend call runs (nested calls count).
  void open() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (open_++ == 0)
      for (const auto& [p, len] : regions_) protect(p, len, PROT_READ | PROT_WRITE);
  }
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (--open_ == 0)
      for (const auto& [p, len] : regions_) protect(p, len, PROT_NONE);
  }

 private:
  static size_t round_to_pages(size_t bytes) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    return (std::max<size_t>(bytes, 1) + page - 1) / page * page;
  }
  static void protect(void* p, size_t len, int prot) {
    LLM_REQUIRE(::mprotect(p, len, prot) == 0, "guard backend: mprotect failed");
  }

  std::mutex mutex_;
  std::map<void*, size_t> regions_;
  int open_ = 0;
};

// The CPU backend behind the guard allocator: every op runs with all buffers open
// (ForwardingBackend's op_begin / op_end around each one); allocations come from the guard
// allocator, accounted to the CPU backend's tracker.
class GuardBackend final : public ForwardingBackend {
 public:
  explicit GuardBackend(int threads) : ForwardingBackend(backend_create_cpu(threads)) {}

  std::string name() const override { return "guard"; }
  MemSpace memory_space() const override { return MemSpace::kDevice; }
  Buffer allocate(MemTag tag, size_t bytes) override {
    return Buffer(&alloc_, &tracker(), tag, bytes);
  }

 protected:
  void op_begin(const char*) override { alloc_.open(); }
  void op_end(const char*) override { alloc_.close(); }

 private:
  GuardAllocator alloc_;
};

}  // namespace

std::unique_ptr<Backend> backend_create_guard(int threads) {
  return std::make_unique<GuardBackend>(threads);
}

}  // namespace ledgerlm
