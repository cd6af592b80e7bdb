// Tracking allocator: every byte the trainer allocates is tagged with a ledger component.
// The tracker keeps current and peak bytes per tag and overall; the memory ledger (train/) reads
// it and reconciles it with the process's own high-water mark. A Buffer is an owning, aligned,
// tagged allocation (RAII); all large storage in ledgerlm is a Buffer.
//
// A Buffer knows where it lives: host memory (the CPU backend, data, staging copies) or a
// device's memory (an accelerator backend). Its Allocator says which and does the allocation;
// code outside a backend never dereferences a buffer in MemSpace::kDevice and moves data with
// the backend's explicit copies (Backend::copy_from_host / copy_to_host / copy).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

#include "model/base/dtype.h"

namespace ledgerlm {

enum class MemTag : uint8_t {
  kParams,          // compute copy of the weights (precision.params)
  kGrads,           // gradients (precision.grads) and the fp32 accumulation buffer
  kMaster,          // fp32 master weights
  kOptimM,          // first moment (Adam-family m, 8-bit codes counted under kOptimCodes)
  kOptimV,          // second moment
  kOptimMomentum,   // SGD / LARS momentum buffer
  kOptimCodes,      // 8-bit quantized state codes
  kOptimAbsmax,     // per-block absmax of quantized state
  kOptimFactored,   // Adafactor row/column statistics
  kOptimZ,          // Schedule-Free's z sequence
  kAverage,         // the average of the weights (optim.ema_half_life)
  kActivations,     // activations kept for backward
  kWorkspace,       // temporaries reused across ops
  kComm,            // communication buffers
  kData,            // token batches, loader buffers
  kOffloadStaging,  // RAM through which offloaded state is read and written (optim.offload)
  kOther,
  kCount
};

constexpr size_t kMemTagCount = static_cast<size_t>(MemTag::kCount);
const char* mem_tag_name(MemTag tag);  // "params", "grads", "master", "optim.m", ...

// Where a buffer's bytes are: addressable by host code, or only by a device's kernels.
enum class MemSpace : uint8_t { kHost, kDevice };
const char* mem_space_name(MemSpace space);  // "host", "device"

// Provides and takes back raw memory for Buffers. allocate() returns zero-filled memory of at
// least `bytes` bytes (64-byte aligned) or nullptr when out of memory.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual MemSpace space() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* data, size_t bytes) = 0;
};

// Host memory: 64-byte aligned, zero-filled and touched (so RSS matches the tracked bytes);
// buffers of 2 MiB or more start on a 2 MiB boundary and ask for transparent huge pages.
Allocator& host_allocator();

struct MemUsage {
  int64_t current = 0;
  int64_t peak = 0;
};

class MemoryTracker {
 public:
  void on_alloc(MemTag tag, size_t bytes);
  void on_free(MemTag tag, size_t bytes);
  MemUsage usage(MemTag tag) const;
  MemUsage total() const;
  void reset_peaks();  // peaks := current (e.g. after start-up, to measure steady state)

 private:
  mutable std::mutex mutex_;
  std::array<MemUsage, kMemTagCount> per_tag_{};
  MemUsage total_{};
};

// Owning allocation of `bytes`, 64-byte aligned and zero-filled, accounted to `tag`.
class Buffer {
 public:
  Buffer() = default;
  // Host memory (host_allocator()).
  Buffer(MemoryTracker* tracker, MemTag tag, size_t bytes);
  // Memory from `allocator` (a backend's host or device memory).
  Buffer(Allocator* allocator, MemoryTracker* tracker, MemTag tag, size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;

  void* data() const { return data_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  MemTag tag() const { return tag_; }
  MemSpace space() const { return allocator_ ? allocator_->space() : MemSpace::kHost; }
  bool empty() const { return data_ == nullptr; }
  void reset();

 private:
  Allocator* allocator_ = nullptr;
  MemoryTracker* tracker_ = nullptr;
  MemTag tag_ = MemTag::kOther;
  size_t bytes_ = 0;
  void* data_ = nullptr;
};

// Reads the process's resident-set high-water mark and current RSS (Linux /proc/self/status),
// the independent figure the ledger reconciles with. Returns false where unavailable.
bool process_rss_bytes(int64_t* current, int64_t* high_water_mark);
// The anonymous part of the current RSS (RssAnon: heap and other private memory, not mapped
// files), -1 where unavailable.
int64_t process_rss_anon_bytes();

}  // namespace ledgerlm
