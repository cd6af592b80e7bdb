// OffloadBackend (see offload_backend.h): paged allocations, and the ops on them staged.
#include "train/offload/offload_backend.h"

#include <algorithm>
#include <string>
#include <utility>

#include "model/backend/optim/optim_op.h"
#include "model/base/check.h"
#include "optim/optim_traits.h"

namespace ledgerlm {

bool offload_tag_paged(MemTag tag) {
  switch (tag) {
    case MemTag::kMaster:
    case MemTag::kOptimM:
    case MemTag::kOptimV:
    case MemTag::kOptimMomentum:
    case MemTag::kOptimCodes:
    case MemTag::kOptimAbsmax:
    case MemTag::kOptimZ:
      return true;
    default:
      return false;
  }
}

int64_t offload_whole_tensor_bytes(const OptimConfig& optim, int64_t largest_numel) {
  // The fp32 master plus the parameter-shaped states one kernel of theirs reads together, at
  // their widest (fp32), from the optimizer's traits: LAMB's moments pass (w, m, v), LARS's apply
  // (w, momentum), Adafactor's vector and apply passes (w, m, v).
  const OptimTraits* t = optim_traits_find(optim.name);
  return (t != nullptr ? t->whole_tensor_bytes : 0) * largest_numel;
}

int64_t offload_staging_bytes(const OptimConfig& optim, int64_t largest_numel) {
  const int64_t asked = static_cast<int64_t>(optim.offload_staging_mb * 1048576.0);
  return std::max(asked, 2 * offload_whole_tensor_bytes(optim, largest_numel));
}

// Paged buffers for one tag: a file each, named after the tag (optim.m, optim.m.1, ...).
class OffloadBackend::PagedAllocator : public Allocator {
 public:
  PagedAllocator(OffloadPager& pager, MemTag tag) : pager_(pager), tag_(tag) {}
  MemSpace space() const override { return MemSpace::kDevice; }
  void* allocate(size_t bytes) override {
    std::string name = mem_tag_name(tag_);
    const std::string index = std::to_string(count_++);
    if (index != "0") name.append(".").append(index);
    return pager_.add_region(name, tag_, static_cast<int64_t>(bytes));
  }
  void deallocate(void* data, size_t) override { pager_.remove_region(data); }

 private:
  OffloadPager& pager_;
  MemTag tag_;
  int count_ = 0;
};

// One op's paged ranges: where each was (to release it) and whether the op writes it.
struct OffloadBackend::Staged {
  struct Range {
    const void* addr = nullptr;
    int64_t bytes = 0;
    bool dirty = false;
  };
  std::vector<Range> ranges;
};

OffloadBackend::OffloadBackend(Backend& inner, OffloadPager* pager, MemoryTracker& tracker)
    : ForwardingBackend(inner), pager_(pager), tracker_(tracker) {
  LLM_REQUIRE(inner.memory_space() == MemSpace::kHost,
              "optim.offload = disk: the optimizer's backend must address host memory");
  // A quarter of the arena per piece: the piece in use, its write-behind and the read-ahead of
  // the next ones fit together.
  chunk_bytes_ = pager != nullptr ? std::max<int64_t>(pager->staging_bytes() / 4, 4096) : 0;
}

OffloadBackend::~OffloadBackend() = default;

Buffer OffloadBackend::allocate(MemTag tag, size_t bytes) {
  if (pager_ == nullptr || !offload_tag_paged(tag) || bytes == 0)
    return Buffer(&tracker_, tag, bytes);  // host memory
  auto& a = allocators_[tag];
  if (!a) a = std::make_unique<PagedAllocator>(*pager_, tag);
  // No tracker: the bytes are in a file, which the ledger measures by its size.
  return Buffer(a.get(), nullptr, tag, bytes);
}

template <class Fn>
void OffloadBackend::in_pieces(int64_t n, int64_t paged_bytes_per_element, Fn&& fn) {
  const int64_t per =
      paged_bytes_per_element > 0
          ? std::max<int64_t>(chunk_bytes_ / paged_bytes_per_element / 1024, 1) * 1024
          : n;
  for (int64_t b = 0; b < n; b += per) fn(b, std::min(per, n - b));
}

void OffloadBackend::copy_from_host(Tensor dst, const void* src, int64_t n) {
  if (!paged(dst.data)) return ForwardingBackend::copy_from_host(dst, src, n);
  const int64_t es = static_cast<int64_t>(dtype_size(dst.dtype));
  in_pieces(n, es, [&](int64_t b, int64_t k) {
    const Tensor d = dst.offset(b);
    void* staged = pager_->acquire(d.data, k * es, OffloadPager::Access::kWrite);
    inner().copy_from_host(Tensor(staged, dst.dtype), static_cast<const char*>(src) + b * es, k);
    pager_->release(d.data, k * es, true);
  });
}

void OffloadBackend::copy_to_host(void* dst, Tensor src, int64_t n) {
  if (!paged(src.data)) return ForwardingBackend::copy_to_host(dst, src, n);
  const int64_t es = static_cast<int64_t>(dtype_size(src.dtype));
  in_pieces(n, es, [&](int64_t b, int64_t k) {
    const Tensor s = src.offset(b);
    void* staged = pager_->acquire(s.data, k * es, OffloadPager::Access::kRead);
    inner().copy_to_host(static_cast<char*>(dst) + b * es, Tensor(staged, src.dtype), k);
    pager_->release(s.data, k * es, false);
  });
}

void OffloadBackend::copy(Tensor dst, Tensor src, int64_t n) {
  convert(dst, src, n);  // same dtype: a conversion is a copy
}

void OffloadBackend::zero(Tensor t, int64_t n) {
  if (!paged(t.data)) return ForwardingBackend::zero(t, n);
  const int64_t es = static_cast<int64_t>(dtype_size(t.dtype));
  in_pieces(n, es, [&](int64_t b, int64_t k) {
    const Tensor d = t.offset(b);
    void* staged = pager_->acquire(d.data, k * es, OffloadPager::Access::kWrite);
    inner().zero(Tensor(staged, t.dtype), k);
    pager_->release(d.data, k * es, true);
  });
}

void OffloadBackend::convert(Tensor dst, Tensor src, int64_t n, Rounding rounding, uint64_t seed,
                             uint64_t stream_offset) {
  const bool pd = paged(dst.data), ps = paged(src.data);
  if (!pd && !ps) return ForwardingBackend::convert(dst, src, n, rounding, seed, stream_offset);
  const int64_t ed = static_cast<int64_t>(dtype_size(dst.dtype));
  const int64_t es = static_cast<int64_t>(dtype_size(src.dtype));
  in_pieces(n, (pd ? ed : 0) + (ps ? es : 0), [&](int64_t b, int64_t k) {
    const Tensor d = dst.offset(b), s = src.offset(b);
    Tensor sd = d, ss = s;
    if (ps) ss.data = pager_->acquire(s.data, k * es, OffloadPager::Access::kRead);
    if (pd) sd.data = pager_->acquire(d.data, k * ed, OffloadPager::Access::kWrite);
    // Stochastic rounding draws by element position: the piece keeps its elements' positions.
    inner().convert(sd, ss, k, rounding, seed, stream_offset + static_cast<uint64_t>(b));
    if (pd) pager_->release(d.data, k * ed, true);
    if (ps) pager_->release(s.data, k * es, false);
  });
}

namespace {

// Kinds that only read the fp32 weights (or do not touch them).
bool reads_weights_only(OptimOpKind k) {
  switch (k) {
    case OptimOpKind::kAdamWMoments:
    case OptimOpKind::kLambMoments:
    case OptimOpKind::kLarsNorms:
    case OptimOpKind::kAdafactorFactoredSums:
    case OptimOpKind::kAdafactorFactoredU2:
    case OptimOpKind::kAdafactorVector:
    case OptimOpKind::kScheduleFreeY:
    case OptimOpKind::kMuonMomentum:
      return true;
    default:
      return false;
  }
}

// Kinds that only read their states.
bool reads_states_only(OptimOpKind k) {
  return k == OptimOpKind::kAdamWParam || k == OptimOpKind::kLambApply ||
         k == OptimOpKind::kScheduleFreeY;
}

int64_t blocks_of(const OptimOp& op) {
  return op.block > 0 ? (op.n + op.block - 1) / op.block : 0;
}

}  // namespace

int64_t OffloadBackend::paged_bytes_per_element(const OptimOp& op) const {
  int64_t b = 0;
  for (const Tensor* t : {&op.w, &op.g, &op.s1, &op.s2, &op.s3, &op.out})
    if (!t->empty() && paged(t->data)) b += static_cast<int64_t>(dtype_size(t->dtype));
  if (op.kind == OptimOpKind::kAdamW8bit && op.block > 0)
    for (const Tensor* t : {&op.a1, &op.a2})
      if (!t->empty() && paged(t->data)) b += 4 / op.block + 1;
  return b;
}

std::vector<OptimOp> OffloadBackend::pieces_of(const OptimOp& op) const {
  const int64_t per_element = paged_bytes_per_element(op);
  const bool cut_elements = optim_op_elementwise(op.kind);
  const bool cut_blocks = op.kind == OptimOpKind::kAdamW8bit && op.block > 0;
  if (per_element == 0 || op.n * per_element <= chunk_bytes_ || !(cut_elements || cut_blocks))
    return {op};
  int64_t per = std::max<int64_t>(chunk_bytes_ / per_element / 1024, 1) * 1024;
  if (cut_blocks) per = std::max<int64_t>(per / op.block, 1) * op.block;
  std::vector<OptimOp> pieces;
  for (int64_t b = 0; b < op.n; b += per) {
    const int64_t k = std::min(per, op.n - b);
    OptimOp piece = optim_op_slice(op, b, k);
    if (cut_blocks) {              // whole quantization blocks: their absmax move with them
      piece.s1 = op.s1.offset(b);  // u8 codes
      piece.s2 = op.s2.offset(b);
      if (!op.a1.empty()) piece.a1 = op.a1.offset(b / op.block);
      if (!op.a2.empty()) piece.a2 = op.a2.offset(b / op.block);
    }
    pieces.push_back(piece);
  }
  return pieces;
}

void OffloadBackend::stage(OptimOp* op, Staged* staged) {
  const bool w_dirty = !reads_weights_only(op->kind);
  const bool s_dirty = !reads_states_only(op->kind);
  const auto take = [&](Tensor* t, int64_t count, bool dirty) {
    if (t->empty() || !paged(t->data)) return;
    const int64_t bytes = count * static_cast<int64_t>(dtype_size(t->dtype));
    const auto access = dirty ? OffloadPager::Access::kReadWrite : OffloadPager::Access::kRead;
    void* at = pager_->acquire(t->data, bytes, access);
    staged->ranges.push_back({t->data, bytes, dirty});  // only once acquired: unstage releases it
    t->data = at;
  };
  try {
    take(&op->w, op->n, w_dirty);
    take(&op->g, op->n, false);
    take(&op->s1, op->n, s_dirty);
    take(&op->s2, op->n, s_dirty);
    take(&op->s3, op->n, s_dirty);
    take(&op->out, op->n, true);
    if (op->kind == OptimOpKind::kAdamW8bit) {
      take(&op->a1, blocks_of(*op), true);
      take(&op->a2, blocks_of(*op), true);
    }
  } catch (...) {  // an I/O failure: let go of what was taken (nothing was changed)
    for (Staged::Range& r : staged->ranges) r.dirty = false;
    unstage(*staged);
    staged->ranges.clear();
    throw;
  }
}

void OffloadBackend::unstage(const Staged& staged) {
  for (const Staged::Range& r : staged.ranges) pager_->release(r.addr, r.bytes, r.dirty);
}

void OffloadBackend::optimizer_op(const OptimOp& op, double* sums) {
  const std::vector<OptimOp> pieces = pieces_of(op);
  // Kinds that reduce are never cut (pieces_of): their sums come from one inner op, as without
  // offload.
  for (OptimOp piece : pieces) {
    Staged staged;
    stage(&piece, &staged);
    try {
      inner().optimizer_op(piece, sums);
    } catch (...) {
      unstage(staged);
      throw;
    }
    unstage(staged);
  }
}

void OffloadBackend::optimizer_ops(const OptimOp* ops, int64_t count) {
  // Element-wise ops over distinct tensors: staged in batches of about one piece's bytes, each
  // batch run together by the inner backend (the same results in any grouping).
  std::vector<OptimOp> batch;
  std::vector<Staged> staged;
  int64_t bytes = 0;
  const auto run_batch = [&] {
    if (batch.empty()) return;
    inner().optimizer_ops(batch.data(), static_cast<int64_t>(batch.size()));
    for (const Staged& s : staged) unstage(s);
    batch.clear();
    staged.clear();
    bytes = 0;
  };
  try {
    for (int64_t i = 0; i < count; ++i) {
      for (OptimOp piece : pieces_of(ops[i])) {
        // Its arena bytes: each range starts on a 64-byte line.
        const int64_t b = piece.n * paged_bytes_per_element(piece) + 64 * 7;
        if (bytes > 0 && bytes + b > chunk_bytes_) run_batch();
        Staged& s = staged.emplace_back();
        stage(&piece, &s);
        batch.push_back(piece);
        bytes += b;
      }
    }
    run_batch();
  } catch (...) {
    for (const Staged& s : staged) unstage(s);
    throw;
  }
}

}  // namespace ledgerlm
