// Muon (Jordan et al. 2024; torch.optim.Muon's update), the hybrid every implementation is:
//   - the blocks' 2-D weights (muon_plan.h): momentum (Nesterov by default), the update
//     orthogonalised by Newton–Schulz (muon_newton_schulz.h), scaled by the shape factor of
//     optim.muon_adjust_lr, decoupled weight decay: 4 bytes of fp32 state (the momentum);
//   - every other trained tensor: AdamW at optim.muon_adamw_lr (scheduled like optim.lr), with
//     optim.beta1, beta2, eps and its group's decay: 8 bytes (m, v).
// The state buffers are compact per group (momentum over the Muon parts, m and v over the AdamW
// parts), so the bytes are exactly 4 and 8 per parameter of each group.
//
// Sharded exactly: under ZeRO a rank holds pieces of matrices. The momentum and the Nesterov
// blend are element-wise on the pieces; only Newton–Schulz needs a whole matrix. Each step the
// blended pieces are sent to their tensor's owner rank (the placement table's, balanced by
// Newton–Schulz FLOPs) with one all-to-all (OptimStepInfo::exchange), the owners orthogonalise,
// and a second all-to-all brings the results back to the pieces, which apply them. The
// arithmetic per element is the same whatever the sharding. When every tensor's owner holds it
// whole (one rank, or ZeRO stage 0 where each rank holds and orthogonalises everything), the
// exchange is the identity and is skipped: the same code path with the buffers aliased.
//
// Scratch for the run (the ledger's comm and workspace rows): the blended pieces (4 bytes per
// Muon parameter held), on owners the gathered tensors (when anything is exchanged), one tensor
// reassembled from several ranks' pieces, and the Newton–Schulz buffers of the largest matrix.
#include <algorithm>
#include <map>
#include <memory>

#include "model/base/check.h"
#include "optim/muon_newton_schulz.h"
#include "optim/muon_plan.h"
#include "optim/optim_common.h"
#include "optim/optim_factories.h"
#include "optim/optim_groups.h"

namespace ledgerlm {
namespace {

class MuonOptimizer : public RangeOptimizer {
 public:
  using RangeOptimizer::RangeOptimizer;
  std::string name() const override { return "muon"; }
  double state_bytes_per_param() const override {
    return backend_ != nullptr ? allocated_bytes_per_param() : state_elem_bytes();
  }

  void step(float* master, Tensor grads, const OptimStepInfo& info) override {
    require_initialized();
    // 1. AdamW for the AdamW group, momentum + blend for the Muon pieces: one element-wise pass.
    const double shape = config_.lr > 0.0 ? info.lr / config_.lr : 0.0;
    ops_.clear();
    for (size_t i = 0; i < segs_.size(); ++i) {
      const OptimSegment& seg = segs_[i];
      if (!muon_[i]) {
        OptimOp op = segment_op(OptimOpKind::kAdamWFused, seg, master, grads, info.grad_scale);
        op.s1 = state_at(m_, local_[i], state_dtype());
        op.s2 = state_at(v_, local_[i], state_dtype());
        op.adamw =
            adamw_step_make<float>(config_.muon_adamw_lr * shape * seg.lr_mult, config_.beta1,
                                   config_.beta2, config_.eps, seg.weight_decay, info.step);
        ops_.push_back(op);
        continue;
      }
      OptimOp op = segment_op(OptimOpKind::kMuonMomentum, seg, master, grads, info.grad_scale);
      op.w = Tensor();
      op.s1 = state_at(momentum_, local_[i], state_dtype());
      op.out = Tensor(send_.as<float>() + send_at_[i], DType::kF32);
      op.muon = muon_step(seg, info.lr);
      ops_.push_back(op);
    }
    backend_->optimizer_ops(ops_.data(), static_cast<int64_t>(ops_.size()));
    if (muon_count_ == 0) return;

    // 2. Gather each matrix tensor's pieces to its owner, orthogonalise, scatter back.
    const Tensor send(send_.data(), DType::kF32);
    const Tensor recv = exchanged_ ? Tensor(recv_.data(), DType::kF32) : send;
    if (exchanged_) {
      LLM_REQUIRE(info.exchange != nullptr,
                  "muon: its matrices are sharded across ranks but the step has no exchange");
      info.exchange(send, send_counts_, recv, recv_counts_);
    }
    for (const Owned& t : owned_) orthogonalise(t, recv);
    if (exchanged_) info.exchange(recv, recv_counts_, send, send_counts_);

    // 3. Apply the orthogonalised updates to the pieces.
    ops_.clear();
    for (size_t i = 0; i < segs_.size(); ++i) {
      if (!muon_[i]) continue;
      const OptimSegment& seg = segs_[i];
      OptimOp op;
      op.kind = OptimOpKind::kMuonApply;
      op.w = Tensor(master + seg.master_at, DType::kF32);
      op.g = Tensor(send_.as<float>() + send_at_[i], DType::kF32);
      op.n = seg.count;
      op.muon = muon_step(seg, info.lr);
      ops_.push_back(op);
    }
    backend_->optimizer_ops(ops_.data(), static_cast<int64_t>(ops_.size()));
  }

  std::vector<StateView> state_views() override {
    std::vector<StateView> views;
    for (size_t i = 0; i < segs_.size(); ++i) {
      if (muon_[i]) {
        views.push_back(mirror_view("momentum", segs_[i], momentum_, state_dtype(), local_[i]));
      } else {
        views.push_back(mirror_view("m", segs_[i], m_, state_dtype(), local_[i]));
        views.push_back(mirror_view("v", segs_[i], v_, state_dtype(), local_[i]));
      }
    }
    return views;
  }

 protected:
  void on_init() override {
    classify();
    plan_exchange();
    momentum_ =
        allocate_state("momentum", MemTag::kOptimMomentum, state_dtype(), muon_count_, "matrix");
    m_ = allocate_state("m", MemTag::kOptimM, state_dtype(), adam_count_, "embedding,nodecay");
    v_ = allocate_state("v", MemTag::kOptimV, state_dtype(), adam_count_, "embedding,nodecay");
    send_ = allocate_state("muon.update", MemTag::kComm, DType::kF32, muon_count_, "matrix", true);
    if (exchanged_)
      recv_ =
          allocate_state("muon.gathered", MemTag::kComm, DType::kF32, recv_total_, "matrix", true);
    whole_ = allocate_state("muon.whole", MemTag::kWorkspace, DType::kF32, whole_elements_,
                            "matrix", true);
    ns_ = allocate_state("muon.newton_schulz", MemTag::kWorkspace, DType::kF32,
                         work_.iterate + 2 * work_.gram, "matrix", true);
  }

 private:
  // A tensor this rank orthogonalises, and where its pieces arrive (in element order).
  struct Piece {
    int64_t begin = 0, count = 0, at = 0;
  };
  struct Owned {
    int param = -1;
    std::vector<Piece> pieces;
  };

  MuonStep<float> muon_step(const OptimSegment& seg, double lr) const {
    const ParamInfo& p = table_.params[static_cast<size_t>(seg.param)];
    MuonStep<float> s;
    s.momentum = static_cast<float>(config_.muon_momentum);
    s.one_minus_momentum = static_cast<float>(1.0 - config_.muon_momentum);
    s.nesterov = config_.muon_nesterov;
    s.decay = static_cast<float>(1.0 - lr * seg.weight_decay);
    s.lr = static_cast<float>(lr * muon_lr_factor(muon_matrix_of(p), config_));
    return s;
  }

  // Which parts are Muon's, and their places in the per-group compact buffers.
  void classify() {
    muon_.assign(segs_.size(), false);
    local_.assign(segs_.size(), 0);
    muon_count_ = adam_count_ = 0;
    for (size_t i = 0; i < segs_.size(); ++i) {
      muon_[i] = muon_orthogonalises(table_.params[static_cast<size_t>(segs_[i].param)], config_);
      int64_t& count = muon_[i] ? muon_count_ : adam_count_;
      local_[i] = count;
      count += segs_[i].count;
    }
  }

  // Who orthogonalises each Muon tensor and where the pieces travel.
  void plan_exchange() {
    const int world = std::max(shard_.world, 1), rank = shard_.rank;
    std::map<int, OptimTensorRanks> spread;  // param -> owner and holders
    for (const OptimTensorRanks& t : shard_.tensors) spread[t.param] = t;
    for (size_t i = 0; i < segs_.size(); ++i) {  // parts with no spread: held whole here
      if (!muon_[i] || spread.count(segs_[i].param)) continue;
      const OptimSegment& seg = segs_[i];
      LLM_REQUIRE(seg.param_begin == 0 && seg.count == seg.numel, "muon: tensor '",
                  table_.params[static_cast<size_t>(seg.param)].name, "' is held in part [",
                  seg.param_begin, ", ", seg.param_begin + seg.count,
                  ") and no rank is named to gather the rest");
      spread[seg.param] = {seg.param, rank, {{rank, 0, seg.numel}}};
    }
    // Exchanged unless every Muon tensor is held whole by its owner (the same answer on every
    // rank: it reads the whole model's spread).
    exchanged_ = false;
    for (const auto& [param, t] : spread) {
      if (!muon_orthogonalises(table_.params[static_cast<size_t>(param)], config_)) continue;
      if (t.holders.size() != 1 || t.holders[0].rank != t.owner) exchanged_ = true;
    }
    // Send layout: blocks by owner rank, within a block the parts in table order.
    send_at_.assign(segs_.size(), 0);
    send_counts_.assign(static_cast<size_t>(world), 0);
    std::vector<size_t> by_param;
    for (size_t i = 0; i < segs_.size(); ++i)
      if (muon_[i]) by_param.push_back(i);
    std::sort(by_param.begin(), by_param.end(),
              [&](size_t a, size_t b) { return segs_[a].param < segs_[b].param; });
    int64_t cursor = 0;
    for (int r = 0; r < world; ++r)
      for (size_t i : by_param) {
        if (spread[segs_[i].param].owner != r) continue;
        send_at_[i] = cursor;
        cursor += segs_[i].count;
        send_counts_[static_cast<size_t>(r)] += segs_[i].count;
      }
    // Receive layout: blocks by source rank, within a block the owned tensors in table order.
    owned_.clear();
    for (const auto& [param, t] : spread)
      if (t.owner == rank &&
          muon_orthogonalises(table_.params[static_cast<size_t>(param)], config_))
        owned_.push_back({param, {}});
    recv_counts_.assign(static_cast<size_t>(world), 0);
    recv_total_ = 0;
    for (int s = 0; s < world; ++s)
      for (Owned& o : owned_)
        for (const OptimHolder& h : spread[o.param].holders) {
          if (h.rank != s || h.count == 0) continue;
          o.pieces.push_back({h.begin, h.count, recv_total_});
          recv_total_ += h.count;
          recv_counts_[static_cast<size_t>(s)] += h.count;
        }
    if (!exchanged_)  // the owner holds every tensor whole: pieces are where this rank's parts are
      for (Owned& o : owned_)
        for (size_t i = 0; i < segs_.size(); ++i)
          if (muon_[i] && segs_[i].param == o.param) o.pieces = {{0, segs_[i].count, send_at_[i]}};
    whole_elements_ = 0;
    work_ = {};
    for (Owned& o : owned_) {
      std::sort(o.pieces.begin(), o.pieces.end(),
                [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
      const ParamInfo& p = table_.params[static_cast<size_t>(o.param)];
      if (o.pieces.size() > 1) whole_elements_ = std::max(whole_elements_, p.numel);
      const MuonWork w = muon_work_of(muon_matrix_of(p));
      work_.iterate = std::max(work_.iterate, w.iterate);
      work_.gram = std::max(work_.gram, w.gram);
    }
  }

  void orthogonalise(const Owned& t, Tensor recv) {
    const ParamInfo& p = table_.params[static_cast<size_t>(t.param)];
    const bool in_place = t.pieces.size() == 1;
    Tensor x = in_place ? recv.offset(t.pieces[0].at) : Tensor(whole_.data(), DType::kF32);
    if (!in_place)
      for (const Piece& pc : t.pieces)
        backend_->copy(x.offset(pc.begin), recv.offset(pc.at), pc.count);
    const MuonMatrix m = muon_matrix_of(p);
    const Tensor work(ns_.data(), DType::kF32);
    const NewtonSchulzWork nw{work, work.offset(work_.iterate),
                              work.offset(work_.iterate + work_.gram)};
    for (int j = 0; j < std::max(p.split, 1); ++j)
      newton_schulz(*backend_, x.offset(j * m.rows * m.cols), m.rows, m.cols,
                    static_cast<int>(config_.ns_steps), config_.ns_eps, nw);
    if (!in_place)
      for (const Piece& pc : t.pieces)
        backend_->copy(recv.offset(pc.at), x.offset(pc.begin), pc.count);
  }

  std::vector<bool> muon_;
  std::vector<int64_t> local_, send_at_;
  int64_t muon_count_ = 0, adam_count_ = 0;
  bool exchanged_ = false;
  std::vector<int64_t> send_counts_, recv_counts_;
  int64_t recv_total_ = 0, whole_elements_ = 0;
  MuonWork work_;
  std::vector<Owned> owned_;
  Buffer momentum_, m_, v_, send_, recv_, whole_, ns_;
  std::vector<OptimOp> ops_;
};

}  // namespace

bool muon_matrix(const ParamInfo& p, const OptimConfig& config) {
  return p.shape.size() == 2 && optim_group_of(p, config) == kGroupMatrix;
}

std::unique_ptr<Optimizer> optimizer_create_muon(const OptimConfig& config) {
  return std::make_unique<MuonOptimizer>(config);
}

}  // namespace ledgerlm
