// Segments, group hyper-parameters, reduce and state bookkeeping shared by the optimizers.
#include "optim/optim_common.h"

#include <algorithm>

#include "model/base/check.h"

namespace ledgerlm {

std::vector<OptimSegment> optim_segments_build(const ParamTable& table,
                                               const std::vector<OptimRange>& ranges,
                                               const OptimConfig& config,
                                               const OptimAddress& address) {
  LLM_ASSERT(address.master.empty() || address.master.size() == ranges.size(),
             "optimizer master address per range");
  LLM_ASSERT(address.grads.empty() || address.grads.size() == ranges.size(),
             "optimizer gradient address per range");
  std::vector<OptimSegment> segs;
  int64_t base = 0, previous_end = 0;
  for (size_t ri = 0; ri < ranges.size(); ++ri) {
    const OptimRange& r = ranges[ri];
    const int64_t master_base = address.master.empty() ? base : address.master[ri];
    const int64_t grad_base = address.grads.empty() ? base : address.grads[ri];
    LLM_REQUIRE(r.begin >= previous_end && r.begin <= r.end && r.end <= table.total,
                "optimizer range [", r.begin, ", ", r.end, ") is outside the flat layout of ",
                table.total, " elements or not after the previous range");
    previous_end = r.end;
    for (size_t i = 0; i < table.params.size(); ++i) {
      const ParamInfo& p = table.params[i];
      const int64_t lo = std::max(r.begin, p.offset), hi = std::min(r.end, p.offset + p.numel);
      if (lo >= hi) continue;
      OptimSegment s;
      s.param = static_cast<int>(i);
      s.local = base + lo - r.begin;
      s.master_at = master_base + lo - r.begin;
      s.grad_at = grad_base + lo - r.begin;
      s.count = hi - lo;
      s.param_begin = lo - p.offset;
      s.numel = p.numel;
      s.real_numel = p.kind == ParamKind::kEmbedding ? p.hf_rows * (p.numel / p.shape[0]) : p.numel;
      s.real_count = std::clamp<int64_t>(s.real_numel - s.param_begin, 0, s.count);
      s.dims = static_cast<int>(p.shape.size());
      s.cols = p.shape.empty() ? 1 : p.shape.back();
      s.rows = s.cols > 0 ? p.numel / s.cols : 0;
      s.kind = p.kind;
      const bool decay = p.decay && (p.kind != ParamKind::kEmbedding || config.decay_embeddings);
      s.weight_decay = decay ? config.weight_decay : 0.0;
      if (p.kind == ParamKind::kEmbedding)
        s.lr_mult = config.lr_mult_embedding;
      else if (p.kind == ParamKind::kBias || p.kind == ParamKind::kNormWeight)
        s.lr_mult = config.lr_mult_nodecay;
      segs.push_back(s);
    }
    base += r.size();
  }
  std::sort(segs.begin(), segs.end(),
            [](const OptimSegment& a, const OptimSegment& b) { return a.local < b.local; });
  for (size_t i = 1; i < segs.size(); ++i)
    LLM_REQUIRE(segs[i - 1].local + segs[i - 1].count <= segs[i].local,
                "parameter table: tensors overlap in the flat layout");
  return segs;
}

int64_t optim_ranges_length(const std::vector<OptimRange>& ranges) {
  int64_t n = 0;
  for (const OptimRange& r : ranges) n += r.size();
  return n;
}

void optim_reduce(const OptimStepInfo& info, std::vector<double>& values) {
  if (info.reduce && !values.empty()) info.reduce(values.data(), static_cast<int>(values.size()));
}

RangeOptimizer::RangeOptimizer(const OptimConfig& config) : config_(config) {
  config_.validate();
}

void RangeOptimizer::init(const ParamTable& table, const std::vector<OptimRange>& ranges,
                          Backend& backend, const OptimAddress& address) {
  table_ = table;
  ranges_ = ranges;
  length_ = optim_ranges_length(ranges);
  backend_ = &backend;
  segs_ = optim_segments_build(table_, ranges, config_, address);
  components_.clear();
  on_init();
}

Buffer RangeOptimizer::allocate_state(const std::string& name, MemTag tag, DType dtype,
                                      int64_t elements) {
  const int64_t bytes = elements * static_cast<int64_t>(dtype_size(dtype));
  components_.push_back({name, dtype, elements, bytes, tag});
  if (bytes == 0) return Buffer();
  return backend_->allocate(tag, static_cast<size_t>(bytes));
}

Buffer RangeOptimizer::allocate_host_state(const std::string& name, MemTag tag, DType dtype,
                                           int64_t elements) {
  const int64_t bytes = elements * static_cast<int64_t>(dtype_size(dtype));
  components_.push_back({name, dtype, elements, bytes, tag});
  if (bytes == 0) return Buffer();
  return Buffer(&backend_->tracker(), tag, static_cast<size_t>(bytes));
}

StateView RangeOptimizer::mirror_view(const std::string& name, const OptimSegment& seg,
                                      const Buffer& buf, DType dtype, int64_t offset) const {
  StateView v;
  v.name = name;
  v.param = seg.param;
  v.dtype = dtype;
  v.data = static_cast<char*>(buf.data()) + offset * static_cast<int64_t>(dtype_size(dtype));
  v.param_begin = seg.param_begin;
  v.numel = seg.count;
  v.shape = table_.params[seg.param].shape;
  return v;
}

OptimOp RangeOptimizer::segment_op(OptimOpKind kind, const OptimSegment& seg, float* master,
                                   Tensor grads, double grad_scale) const {
  OptimOp op;
  op.kind = kind;
  op.w = Tensor(master + seg.master_at, DType::kF32);
  op.g = grads.offset(seg.grad_at);
  op.grad_scale = grad_scale;
  op.n = seg.count;
  return op;
}

Tensor RangeOptimizer::state_at(const Buffer& buf, int64_t local, DType dtype) {
  if (buf.empty()) return Tensor();
  return Tensor(buf.data(), dtype).offset(local);
}

std::array<double, 2> RangeOptimizer::run(const OptimOp& op) const {
  std::array<double, 2> sums{0.0, 0.0};
  backend_->optimizer_op(op, sums.data());
  return sums;
}

void RangeOptimizer::run_scheduled(const std::vector<OptimOp>& fused,
                                   std::span<const OptimOpKind> stages) const {
  auto staged = [&](OptimOp op, OptimOpKind kind) {
    op.kind = kind;
    run(op);
  };
  // fused and foreach hand each pass over all tensors to the backend at once (one parallel
  // region on the CPU); loop is the per-tensor schedule by definition.
  if (config_.impl == "fused") {
    backend_->optimizer_ops(fused.data(), static_cast<int64_t>(fused.size()));
  } else if (config_.impl == "loop") {
    for (const OptimOp& op : fused)
      for (OptimOpKind kind : stages) staged(op, kind);
  } else {  // foreach
    std::vector<OptimOp>& pass = pass_;
    for (OptimOpKind kind : stages) {
      pass.assign(fused.begin(), fused.end());
      for (OptimOp& op : pass) op.kind = kind;
      backend_->optimizer_ops(pass.data(), static_cast<int64_t>(pass.size()));
    }
  }
}

std::vector<StateView> MomentsOptimizer::state_views() {
  std::vector<StateView> views;
  for (const auto& seg : segs_) {
    views.push_back(mirror_view("m", seg, m_));
    views.push_back(mirror_view("v", seg, v_));
  }
  return views;
}

void MomentsOptimizer::on_init() {
  m_ = allocate_state("m", MemTag::kOptimM, state_dtype(), length_);
  v_ = allocate_state("v", MemTag::kOptimV, state_dtype(), length_);
}

void RangeOptimizer::require_initialized() const {
  LLM_ASSERT(backend_ != nullptr, "optimizer step before init");
}

}  // namespace ledgerlm
