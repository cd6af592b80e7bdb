// One piece of an element-wise optimizer kernel (optim_op_elementwise kinds), run serially in
// vectorisable loops over the element functions of optim_kernels.h. Written once and compiled
// twice: for the baseline ISA in cpu_optim.cpp and for AVX2 in cpu_optim_avx2.cpp. Neither
// target has fused multiply-add enabled here, so both run the same IEEE operations in the same
// order per element and their results are bitwise equal (and equal to cpu_optimizer_op's).
// optim_op_visit_elementwise picks the kind and types the arrays; PieceLoops holds the loops.
//
// Include inside the including unit's own (anonymous) namespace, after cpu_optim.h and
// optim_op_visit.h.

struct PieceLoops {
  void sgd_decay(float* w, int64_t n, const SgdStep<float>& s) const {
    if (s.decay == 1.0f) return;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) sgd_decay_at(w, i, s);
  }
  template <class S, class G>
  void sgd_buf(float* w, S* buf, const G& g, int64_t n, const SgdStep<float>& s) const {
    if (s.momentum == 0.0f) return;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) sgd_buf_at(w, buf, g, i, s);
  }
  template <class S, class G>
  void sgd_param(float* w, S* buf, const G& g, int64_t n, const SgdStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) sgd_param_at(w, buf, g, i, s);
  }
  template <class S, class G>
  void sgd_fused(float* w, S* buf, const G& g, int64_t n, const SgdStep<float>& s) const {
    if (s.momentum == 0.0f) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) sgd_update_plain_at(w, g, i, s);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) sgd_update_momentum_at(w, buf, g, i, s);
    }
  }
  void adamw_decay(float* w, int64_t n, const AdamWStep<float>& s) const {
    if (s.decay == 1.0f) return;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw_decay_at(w, i, s);
  }
  template <class S, class G>
  void adamw_moments(S* m, S* v, const G& g, int64_t n, const AdamWStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw_moments_at<float>(m, v, g, i, s);
  }
  template <class S>
  void adamw_param(float* w, S* m, S* v, int64_t n, const AdamWStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw_param_at(w, m, v, i, s);
  }
  template <class S, class G>
  void adamw_fused(float* w, S* m, S* v, const G& g, int64_t n, const AdamWStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) adamw_update_at(w, m, v, g, i, s);
  }
  template <class S, class G>
  void lion(float* w, S* m, const G& g, int64_t n, const LionStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) lion_update_at(w, m, g, i, s);
  }
  template <class S, class G>
  void ademamix(float* w, S* m1, S* nu, S* m2, const G& g, int64_t n,
                const AdEMAMixStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) ademamix_update_at(w, m1, nu, m2, g, i, s);
  }
  template <class S, class G, class O>
  void schedulefree(float* x, S* z, S* v, const G& g, const O& y, int64_t n,
                    const ScheduleFreeStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) schedulefree_update_at(x, z, v, g, y, i, s);
  }
  template <class S, class O>
  void schedulefree_y(const float* x, const S* z, const O& y, int64_t n,
                      const ScheduleFreeStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) schedulefree_y_at(x, z, y, i, s);
  }
  template <class S, class G>
  void muon_momentum(S* buf, const G& g, OutF32 u, int64_t n, const MuonStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) muon_momentum_at(buf, g, u, i, s);
  }
  template <class G>
  void muon_apply(float* w, const G& o, int64_t n, const MuonStep<float>& s) const {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) muon_apply_at(w, o, i, s);
  }
};

void optim_piece(const OptimOp& op) {
  optim_op_visit_elementwise(op, PieceLoops{});
}
