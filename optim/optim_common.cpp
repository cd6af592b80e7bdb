// Segments, group hyper-parameters, reduce and state bookkeeping shared by the optimizers.
#include "optim/optim_common.h"

#include <algorithm>

#include "model/base/check.h"
#include "optim/optim_groups.h"
#include "optim/optim_traits.h"

namespace ledgerlm {

std::vector<OptimSegment> optim_segments_build(const ParamTable& table, const OptimShard& shard,
                                               const OptimConfig& config) {
  const std::vector<OptimGroup> groups = optim_groups(config);
  std::vector<OptimSegment> segs;
  for (const OptimPart& part : shard.parts) {
    LLM_REQUIRE(part.param >= 0 && part.param < static_cast<int>(table.params.size()),
                "optimizer part of tensor ", part.param, ": not in the parameter table");
    const ParamInfo& p = table.params[static_cast<size_t>(part.param)];
    LLM_REQUIRE(
        part.count > 0 && part.param_begin >= 0 && part.param_begin + part.count <= p.numel &&
            part.local >= 0 && part.local + part.count <= shard.length,
        "optimizer part of '", p.name, "' [", part.param_begin, ", ", part.param_begin + part.count,
        ") at ", part.local, " is outside the tensor or the shard of ", shard.length, " elements");
    LLM_REQUIRE(part.group >= 0 && part.group < static_cast<int>(groups.size()),
                "optimizer part of '", p.name, "': no optimizer group ", part.group);
    OptimSegment s;
    s.param = part.param;
    s.local = part.local;
    s.master_at = part.master_at;
    s.grad_at = part.grad_at;
    s.compute_at = part.compute_at;
    s.count = part.count;
    s.param_begin = part.param_begin;
    s.numel = p.numel;
    s.real_numel = p.kind == ParamKind::kEmbedding ? p.hf_rows * (p.numel / p.shape[0]) : p.numel;
    s.real_count = std::clamp<int64_t>(s.real_numel - s.param_begin, 0, s.count);
    s.dims = static_cast<int>(p.shape.size());
    s.cols = p.shape.empty() ? 1 : p.shape.back();
    s.rows = s.cols > 0 ? p.numel / s.cols : 0;
    s.kind = p.kind;
    s.split = p.split;
    s.group = part.group;
    const OptimGroup& g = groups[static_cast<size_t>(part.group)];
    s.lr_mult = g.lr_mult;
    s.weight_decay = g.weight_decay;
    segs.push_back(s);
  }
  std::sort(segs.begin(), segs.end(),
            [](const OptimSegment& a, const OptimSegment& b) { return a.local < b.local; });
  for (size_t i = 1; i < segs.size(); ++i)
    LLM_REQUIRE(segs[i - 1].local + segs[i - 1].count <= segs[i].local,
                "optimizer parts overlap in the state buffers");
  return segs;
}

OptimShard optim_shard_of_range(const ParamTable& table, const OptimConfig& config, int64_t begin,
                                int64_t end) {
  LLM_REQUIRE(0 <= begin && begin <= end && end <= table.total, "optimizer range [", begin, ", ",
              end, ") is outside the flat layout of ", table.total, " elements");
  OptimShard shard;
  shard.length = end - begin;
  for (size_t i = 0; i < table.params.size(); ++i) {
    const ParamInfo& p = table.params[i];
    const int64_t lo = std::max(begin, p.offset), hi = std::min(end, p.offset + p.numel);
    if (lo >= hi) continue;
    OptimPart part;
    part.param = static_cast<int>(i);
    part.group = optim_group_of(p, config);
    part.param_begin = lo - p.offset;
    part.count = hi - lo;
    part.local = part.master_at = part.grad_at = part.compute_at = lo - begin;
    shard.parts.push_back(part);
  }
  return shard;
}

void Optimizer::init(const ParamTable& table, int64_t begin, int64_t end, Backend& backend) {
  init(table, optim_shard_of_range(table, config(), begin, end), backend);
}

void optim_reduce(const OptimStepInfo& info, std::vector<double>& values) {
  if (info.reduce && !values.empty()) info.reduce(values.data(), static_cast<int>(values.size()));
}

RangeOptimizer::RangeOptimizer(const OptimConfig& config) : config_(config) {
  config_.validate();
}

void RangeOptimizer::init(const ParamTable& table, const OptimShard& shard, Backend& backend) {
  table_ = table;
  length_ = shard.length;
  shard_ = shard;
  backend_ = &backend;
  segs_ = optim_segments_build(table_, shard, config_);
  components_.clear();
  on_init();
}

double RangeOptimizer::state_bytes_per_param() const {
  return optim_state_bytes_per_param(config_);
}

double RangeOptimizer::allocated_bytes_per_param() const {
  int64_t bytes = 0, params = 0;
  for (const auto& c : components_)
    if (!c.scratch) bytes += c.bytes;  // state only: Muon's exchange buffers are not state
  for (const auto& s : segs_) params += s.count;
  return params > 0 ? static_cast<double>(bytes) / static_cast<double>(params) : 0.0;
}

Buffer RangeOptimizer::allocate_state(const std::string& name, MemTag tag, DType dtype,
                                      int64_t elements, const std::string& group, bool scratch) {
  const int64_t bytes = elements * static_cast<int64_t>(dtype_size(dtype));
  components_.push_back({name, dtype, elements, bytes, tag, false, group, scratch});
  if (bytes == 0) return Buffer();
  return backend_->allocate(tag, static_cast<size_t>(bytes));
}

Buffer RangeOptimizer::allocate_host_state(const std::string& name, MemTag tag, DType dtype,
                                           int64_t elements) {
  const int64_t bytes = elements * static_cast<int64_t>(dtype_size(dtype));
  components_.push_back({name, dtype, elements, bytes, tag, true});
  if (bytes == 0) return Buffer();
  return Buffer(&backend_->tracker(), tag, static_cast<size_t>(bytes));
}

StateView RangeOptimizer::scalar_view(const std::string& name, const Buffer& buf,
                                      int64_t count) const {
  StateView v;
  v.name = name;
  v.param = -1;
  v.dtype = DType::kF64;
  v.data = buf.data();
  v.numel = count;
  v.shape = {count};
  v.write = shard_.rank == 0;
  v.host = true;
  return v;
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
