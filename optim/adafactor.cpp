// Adafactor (arXiv 1804.04235): factored second moment for tensors with >= 2 dims (running row
// and column sums of G^2 + eps1, (rows + cols) x 4 bytes per matrix), full V for vectors,
// update clipping U / max(1, RMS(U)/d), relative step size max(eps2, RMS(w)) * rho_t, optional
// beta1 momentum on the clipped update.
//
// Sharding: a rank holding a slice of a matrix adds its partial row/column sums into the batched
// reduce, and keeps the full R and C (they are tiny), so every rank folds identical statistics.
// RMS(U) depends on the reduced R and C, so Adafactor needs a second reduce call per step.
// Weight decay (where the group has it) is decoupled: w *= 1 - rho*lr_mult*wd.
// Only real elements take part: the token embedding's padding rows (vocab rounded up to a
// multiple of 64) are left out of the row/column statistics, the RMS terms divide by the real
// element count, and those rows are never updated — so a padded embedding steps exactly like
// the unpadded tensor would.
// The beta1 momentum m and the vectors' V are stored as OptimConfig::state_dtype (fp32 or bf16,
// updated in fp32); the factored row/column statistics are always fp32 (they are tiny, and their
// ratios set every element's step size).
#include <memory>
#include <type_traits>

#include "model/backend/optim/optim_kernels_trust.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"

namespace ledgerlm {
namespace {

class AdafactorOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "adafactor"; }

  double state_bytes_per_param() const override {
    if (backend_ == nullptr || segs_.empty())  // before init: matrices dominate, stats are tiny
      return (config_.adafactor_beta1 > 0.0 ? state_elem_bytes() : 0.0) + 0.02;
    return allocated_bytes_per_param();
  }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    const double beta2 = adafactor_beta2(info.step, config_.adafactor_decay_rate);
    const double rho_base =
        config_.adafactor_relative_step ? adafactor_relative_rho(info.step) : info.lr;
    const size_t n = segs_.size();
    std::vector<AdafactorStep<float>> steps(n);
    for (size_t k = 0; k < n; ++k) {
      auto& s = steps[k];
      s.beta2 = static_cast<float>(beta2);
      s.one_minus_beta2 = static_cast<float>(1.0 - beta2);
      s.eps1 = static_cast<float>(config_.adafactor_eps1);
      s.beta1 = static_cast<float>(config_.adafactor_beta1);
      s.one_minus_beta1 = static_cast<float>(1.0 - config_.adafactor_beta1);
      s.decay = static_cast<float>(1.0 - rho_base * segs_[k].lr_mult * segs_[k].weight_decay);
    }
    run_step(master, grads, info, steps, rho_base);
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (size_t k = 0; k < segs_.size(); ++k) {
      const OptimSegment& seg = segs_[k];
      if (factored(seg)) {
        views.push_back(whole_view("row", seg, row_.as<float>() + state_off_[k], seg.rows));
        views.push_back(whole_view("col", seg, col_.as<float>() + col_off_[k], seg.cols));
      } else {  // v is stored compactly, not mirrored
        views.push_back(mirror_view("v", seg, v_, state_dtype(), state_off_[k]));
      }
      if (!m_.empty()) views.push_back(mirror_view("m", seg, m_));
    }
    return views;
  }

 protected:
  void on_init() override {
    // First-reduce layout over the whole table: sum w^2, then rows and columns for matrices.
    std::vector<int64_t> red_of_param(table_.params.size());
    int64_t red = 0;
    for (size_t p = 0; p < table_.params.size(); ++p) {
      const auto& shape = table_.params[p].shape;
      red_of_param[p] = red;
      red += shape.size() >= 2 ? 1 + table_.params[p].numel / shape.back() + shape.back() : 1;
    }
    red1_size_ = static_cast<size_t>(red);
    int64_t rows = 0, cols = 0, vec = 0;
    state_off_.assign(segs_.size(), 0);
    col_off_.assign(segs_.size(), 0);
    red1_off_.assign(segs_.size(), 0);
    for (size_t k = 0; k < segs_.size(); ++k) {
      const OptimSegment& seg = segs_[k];
      red1_off_[k] = red_of_param[seg.param];
      if (factored(seg)) {
        state_off_[k] = rows;
        col_off_[k] = cols;
        rows += seg.rows;
        cols += seg.cols;
      } else {
        state_off_[k] = vec;
        vec += seg.count;
      }
    }
    // The factored statistics live in host memory: the fold between the passes reads them.
    row_ = allocate_host_state("row", MemTag::kOptimFactored, DType::kF32, rows);
    col_ = allocate_host_state("col", MemTag::kOptimFactored, DType::kF32, cols);
    v_ = allocate_state("v", MemTag::kOptimV, state_dtype(), vec);
    if (config_.adafactor_beta1 > 0.0)
      m_ = allocate_state("m", MemTag::kOptimM, state_dtype(), length_);
  }

 private:
  static bool factored(const OptimSegment& seg) { return seg.dims >= 2; }

  // The elementwise passes run on the backend (Backend::optimizer_op); the factored row and
  // column statistics are tiny and live in host memory, where their fold and the row fractions
  // are computed between the passes.
  OptimOp op_for(OptimOpKind kind, size_t k, float* master, Tensor grads, const OptimStepInfo& info,
                 const std::vector<AdafactorStep<float>>& steps) const {
    const OptimSegment& seg = segs_[k];
    OptimOp op = segment_op(kind, seg, master, grads, info.grad_scale);
    op.n = seg.real_count;  // padded vocabulary rows take no part (see the header comment)
    op.p0 = seg.param_begin;
    op.cols = seg.cols;
    op.adafactor = steps[k];
    return op;
  }

  void run_step(float* master, Tensor grads, const OptimStepInfo& info,
                const std::vector<AdafactorStep<float>>& steps, double rho_base) {
    float* row = row_.as<float>();
    float* col = col_.as<float>();
    const size_t n = segs_.size();
    // Reduce 1: per tensor sum w^2, then (matrices) row and column partial sums.
    // Both reduces are laid out by table position (not by segment), so every rank reduces the
    // same layout whatever slice of the tensors it holds.
    std::vector<double> red1(red1_size_), red2(table_.params.size());
    for (size_t k = 0; k < n; ++k) {
      const OptimSegment& seg = segs_[k];
      double* r = red1.data() + red1_off_[k];
      if (factored(seg)) {
        OptimOp op = op_for(OptimOpKind::kAdafactorFactoredSums, k, master, grads, info, steps);
        op.row_acc = r + 1;
        op.col_acc = r + 1 + seg.rows;
        r[0] = run(op)[0];
      } else {
        OptimOp op = op_for(OptimOpKind::kAdafactorVector, k, master, grads, info, steps);
        op.s1 = state_at(v_, state_off_[k], state_dtype());
        const auto sums = run(op);
        r[0] = sums[0];
        red2[seg.param] = sums[1];
      }
    }
    optim_reduce(info, red1);
    // Fold R, C; reduce 2: sum U^2 of the matrices.
    std::vector<std::vector<float>> frac(n);
    for (size_t k = 0; k < n; ++k) {
      const OptimSegment& seg = segs_[k];
      if (!factored(seg)) continue;
      const double* r = red1.data() + red1_off_[k];
      float* rk = row + state_off_[k];
      float* ck = col + col_off_[k];
      const double sum_r =
          adafactor_factored_fold(rk, ck, seg.rows, seg.cols, r + 1, r + 1 + seg.rows, steps[k]);
      frac[k].resize(static_cast<size_t>(seg.rows));
      for (int64_t i = 0; i < seg.rows; ++i)
        frac[k][i] = static_cast<float>(static_cast<double>(rk[i]) / sum_r);
      OptimOp op = op_for(OptimOpKind::kAdafactorFactoredU2, k, master, grads, info, steps);
      op.row_frac = frac[k].data();
      op.col = ck;
      red2[seg.param] = run(op)[0];
    }
    // Vector tensors' U^2 sums were computed locally before; they are partials too.
    optim_reduce(info, red2);
    for (size_t k = 0; k < n; ++k) {
      const OptimSegment& seg = segs_[k];
      const auto a =
          adafactor_scalars(red1[red1_off_[k]], red2[seg.param], seg.real_numel,
                            rho_base * seg.lr_mult, config_.adafactor_eps2, config_.adafactor_d);
      const bool mat = factored(seg);
      OptimOp op =
          op_for(mat ? OptimOpKind::kAdafactorApplyFactored : OptimOpKind::kAdafactorApplyVector, k,
                 master, grads, info, steps);
      op.s1 = state_at(m_, seg.local, state_dtype());  // empty without momentum
      if (mat) {
        op.row_frac = frac[k].data();
        op.col = col + col_off_[k];
      } else {
        op.s2 = state_at(v_, state_off_[k], state_dtype());
      }
      op.u_scale = static_cast<float>(a.u_scale);
      op.alpha = static_cast<float>(a.alpha);
      run(op);
    }
  }

  StateView whole_view(const std::string& name, const OptimSegment& seg, float* data,
                       int64_t numel) const {
    StateView sv;
    sv.name = name;
    sv.param = seg.param;
    sv.write = seg.param_begin == 0;
    sv.host = true;  // row_ and col_ are host buffers
    sv.dtype = DType::kF32;
    sv.data = data;
    sv.param_begin = 0;
    sv.numel = numel;
    sv.shape = {numel};
    return sv;
  }

  Buffer row_, col_, v_, m_;
  // Per segment: offset of its rows (matrices) or of its v elements (vectors), of its columns,
  // and of its values in the first reduce.
  std::vector<int64_t> state_off_, col_off_, red1_off_;
  size_t red1_size_ = 0;
};

}  // namespace

bool adafactor_factors(const ParamInfo& p, const OptimConfig&) {
  return p.shape.size() >= 2;
}

std::unique_ptr<Optimizer> optimizer_create_adafactor(const OptimConfig& config) {
  return std::make_unique<AdafactorOptimizer>(config);
}

}  // namespace ledgerlm
