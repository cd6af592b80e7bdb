// 8-bit AdamW (arXiv 2110.02861): m and v stored as 8-bit codes of the dynamic map (signed for m,
// unsigned for v), block-wise with one fp32 absmax per block. Each step decodes a block, runs the
// same fp32 AdamW arithmetic as adamw.cpp, and re-encodes it. Blocks never cross tensors: the
// layout starts every tensor at a multiple of the block (param_table.h). Tensors with fewer than
// kSmallTensor elements (and, with optim.embedding_fp32_state, the embeddings) keep fp32 m and v,
// where quantization error would cost most relative to the bytes it saves.
#include <algorithm>
#include <memory>

#include "model/base/check.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class AdamW8bitOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "adamw8bit"; }

  double state_bytes_per_param() const override {
    if (backend_ == nullptr || segs_.empty()) return RangeOptimizer::state_bytes_per_param();
    return allocated_bytes_per_param();
  }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    const int64_t B = config_.block_size;
    for (size_t k = 0; k < segs_.size(); ++k) {
      const OptimSegment& seg = segs_[k];
      OptimOp op = segment_op(quantized_[k] ? OptimOpKind::kAdamW8bit : OptimOpKind::kAdamWFused,
                              seg, master, grads, info.grad_scale);
      op.adamw = adamw_step_make<float>(info.lr * seg.lr_mult, config_.beta1, config_.beta2,
                                        config_.eps, seg.weight_decay, info.step);
      if (quantized_[k]) {
        op.s1 = state_at(codes_m_, off_[k], DType::kU8);
        op.s2 = state_at(codes_v_, off_[k], DType::kU8);
        op.a1 = state_at(absmax_m_, off_[k] / B, DType::kF32);
        op.a2 = state_at(absmax_v_, off_[k] / B, DType::kF32);
        op.block = B;
      } else {
        op.s1 = state_at(m32_, off_[k], DType::kF32);
        op.s2 = state_at(v32_, off_[k], DType::kF32);
      }
      run(op);
    }
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    const int64_t B = config_.block_size;
    for (size_t k = 0; k < segs_.size(); ++k) {
      const OptimSegment& seg = segs_[k];
      const auto& shape = table_.params[seg.param].shape;
      if (!quantized_[k]) {
        views.push_back(view("m", seg.param, DType::kF32, m32_.as<float>() + off_[k],
                             seg.param_begin, seg.count, shape));
        views.push_back(view("v", seg.param, DType::kF32, v32_.as<float>() + off_[k],
                             seg.param_begin, seg.count, shape));
        continue;
      }
      const int64_t blocks = (seg.count + B - 1) / B, total_blocks = (seg.numel + B - 1) / B;
      const int64_t a = off_[k] / B;
      views.push_back(view("codes.m", seg.param, DType::kU8, codes_m_.as<uint8_t>() + off_[k],
                           seg.param_begin, seg.count, shape));
      views.push_back(view("codes.v", seg.param, DType::kU8, codes_v_.as<uint8_t>() + off_[k],
                           seg.param_begin, seg.count, shape));
      views.push_back(view("absmax.m", seg.param, DType::kF32, absmax_m_.as<float>() + a,
                           seg.param_begin / B, blocks, {total_blocks}));
      views.push_back(view("absmax.v", seg.param, DType::kF32, absmax_v_.as<float>() + a,
                           seg.param_begin / B, blocks, {total_blocks}));
    }
    return views;
  }

 protected:
  void on_init() override {
    const int64_t B = config_.block_size;
    LLM_REQUIRE(table_.options.block % B == 0, "optim.block_size=", B,
                " must divide the layout block ", table_.options.block,
                " so quantization blocks never cross tensors");
    for (const OptimSegment& seg : segs_)
      LLM_REQUIRE((table_.params[static_cast<size_t>(seg.param)].offset + seg.param_begin) % B == 0,
                  "adamw8bit: the part of '", table_.params[static_cast<size_t>(seg.param)].name,
                  "' from element ", seg.param_begin,
                  " must start on a multiple of optim.block_size=", B);
    int64_t q = 0, f = 0;
    quantized_.assign(segs_.size(), false);
    off_.assign(segs_.size(), 0);
    for (size_t k = 0; k < segs_.size(); ++k) {
      const OptimSegment& seg = segs_[k];
      quantized_[k] = adamw8bit_quantizes(table_.params[static_cast<size_t>(seg.param)], config_);
      if (quantized_[k]) {
        LLM_ASSERT(seg.param_begin % B == 0, "tensor slice not block-aligned");
        off_[k] = q;
        q += (seg.count + B - 1) / B * B;
      } else {
        off_[k] = f;
        f += seg.count;
      }
    }
    codes_m_ = allocate_state("codes.m", MemTag::kOptimCodes, DType::kU8, q);
    codes_v_ = allocate_state("codes.v", MemTag::kOptimCodes, DType::kU8, q);
    absmax_m_ = allocate_state("absmax.m", MemTag::kOptimAbsmax, DType::kF32, q / B);
    absmax_v_ = allocate_state("absmax.v", MemTag::kOptimAbsmax, DType::kF32, q / B);
    m32_ = allocate_state("m", MemTag::kOptimM, DType::kF32, f);
    v32_ = allocate_state("v", MemTag::kOptimV, DType::kF32, f);
  }

 private:
  static StateView view(const std::string& name, int param, DType dtype, void* data, int64_t begin,
                        int64_t numel, std::vector<int64_t> shape) {
    StateView v;
    v.name = name;
    v.param = param;
    v.dtype = dtype;
    v.data = data;
    v.param_begin = begin;
    v.numel = numel;
    v.shape = std::move(shape);
    return v;
  }

  Buffer codes_m_, codes_v_, absmax_m_, absmax_v_, m32_, v32_;
  std::vector<bool> quantized_;
  std::vector<int64_t> off_;  // codes offset (quantized) or fp32 state offset, per segment
};

}  // namespace

bool adamw8bit_quantizes(const ParamInfo& p, const OptimConfig& config) {
  const bool small = p.numel < kSmallTensor;
  const bool emb32 = config.embedding_fp32_state && p.kind == ParamKind::kEmbedding;
  return !small && !emb32;
}

std::unique_ptr<Optimizer> optimizer_create_adamw8bit(const OptimConfig& config) {
  return std::make_unique<AdamW8bitOptimizer>(config);
}

}  // namespace ledgerlm
