// The backend the optimizer and the fp32 master see under optim.offload = disk: a host backend
// whose state buffers live in files (offload_pager.h). Allocations with a state tag (master,
// moments, momentum, 8-bit codes and absmax, Schedule-Free's z) become paged buffers; everything
// else is the inner backend's. The ops that reach paged memory — the optimizer kernels, and the
// copies and conversions the trainer runs on the master and the state (compute-copy writes,
// checkpoint save and load) — stage their ranges through the pager around the inner backend's
// op, which runs on the staged bytes exactly as it would on RAM: the same element functions on
// the same values, so results are bit-identical to optim.offload = none.
//
// Element-wise kernels (optim_op_elementwise) and 8-bit AdamW (whole quantization blocks) are cut
// into pieces of at most chunk_bytes of paged data each, so any staging size works for them and
// a tensor streams through several pieces in flight. Kernels that reduce over a whole tensor
// (LAMB and LARS norms, Adafactor's statistics) need the tensor's paged ranges staged together:
// offload_whole_tensor_bytes() says how much, and the arena is sized to at least that.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "model/backend/wrap/forwarding_backend.h"
#include "model/param_table.h"
#include "optim/optim_config.h"
#include "train/offload/offload_pager.h"

namespace ledgerlm {

// True for the tags whose buffers optim.offload moves off the compute device.
bool offload_tag_paged(MemTag tag);

// Paged bytes one whole-tensor kernel of `optim` stages at once for the largest of `numels`
// (0 for optimizers whose kernels all cut into pieces).
int64_t offload_whole_tensor_bytes(const OptimConfig& optim, int64_t largest_numel);
// The staging arena for a run: optim.offload_staging_mb, raised to twice the whole-tensor need so
// that a tensor's ranges and the next one's read-ahead fit together.
int64_t offload_staging_bytes(const OptimConfig& optim, int64_t largest_numel);

class OffloadBackend : public ForwardingBackend {
 public:
  // `inner` must address host memory (the CPU backend, or the host backend of a device run).
  // With a pager, the state tags' buffers are paged; without one (optim.offload = host) every
  // buffer is host memory. Either way allocations are accounted to `tracker` (the run's).
  OffloadBackend(Backend& inner, OffloadPager* pager, MemoryTracker& tracker);
  ~OffloadBackend() override;

  // Paged memory is not addressable by host code: the trainer streams it (checkpoint pieces).
  MemSpace memory_space() const override {
    return pager_ != nullptr ? MemSpace::kDevice : MemSpace::kHost;
  }
  MemoryTracker& tracker() override { return tracker_; }
  Buffer allocate(MemTag tag, size_t bytes) override;

  void copy_from_host(Tensor dst, const void* src, int64_t n) override;
  void copy_to_host(void* dst, Tensor src, int64_t n) override;
  void copy(Tensor dst, Tensor src, int64_t n) override;
  void zero(Tensor t, int64_t n) override;
  void convert(Tensor dst, Tensor src, int64_t n, Rounding rounding = Rounding::kNearest,
               uint64_t seed = 0, uint64_t stream_offset = 0) override;
  void optimizer_op(const OptimOp& op, double* sums) override;
  void optimizer_ops(const OptimOp* ops, int64_t count) override;

 private:
  class PagedAllocator;
  struct Staged;  // an op's paged ranges, acquired
  // Runs `fn(offset, count)` over [0, n) in pieces whose paged bytes stay within chunk_bytes_.
  template <class Fn>
  void in_pieces(int64_t n, int64_t paged_bytes_per_element, Fn&& fn);
  // The op's paged ranges acquired (the op rewritten to the staged addresses) or released.
  void stage(OptimOp* op, Staged* staged);
  void unstage(const Staged& staged);
  // Pieces of an op small enough to stage (one piece when it cannot be cut).
  std::vector<OptimOp> pieces_of(const OptimOp& op) const;
  int64_t paged_bytes_per_element(const OptimOp& op) const;

  bool paged(const void* p) const { return pager_ != nullptr && pager_->contains(p); }

  OffloadPager* pager_;
  MemoryTracker& tracker_;
  int64_t chunk_bytes_ = 0;
  std::map<MemTag, std::unique_ptr<PagedAllocator>> allocators_;
};

}  // namespace ledgerlm
