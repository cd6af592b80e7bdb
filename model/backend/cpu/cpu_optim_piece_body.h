// One piece of an element-wise optimizer kernel (optim_op_elementwise kinds), run serially in
// vectorisable loops over the element functions of optim_kernels.h. Written once and compiled
// twice: for the baseline ISA in cpu_optim.cpp and for AVX2 in cpu_optim_avx2.cpp. Neither
// target has fused multiply-add enabled here, so both run the same IEEE operations in the same
// order per element and their results are bitwise equal (and equal to cpu_optimizer_op's).
//
// Include inside the including unit's own (anonymous) namespace, after cpu_optim.h.

void optim_piece(const OptimOp& op) {
  float* w = op.w.as<float>();
  const int64_t n = op.n;
  const AdamWStep<float>& adamw = op.adamw;
  const SgdStep<float>& sgd = op.sgd;
  switch (op.kind) {
    case OptimOpKind::kAdamWDecay:
      if (adamw.decay == 1.0f) return;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) adamw_decay_at(w, i, adamw);
      return;
    case OptimOpKind::kSgdDecay:
      if (sgd.decay == 1.0f) return;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) sgd_decay_at(w, i, sgd);
      return;
    case OptimOpKind::kAdamWParam:
      return optim_with_states(op, [&](auto* m, auto* v) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) adamw_param_at(w, m, v, i, adamw);
      });
    default:
      break;
  }
  optim_with_grad_view(op.g, op.grad_scale, [&](auto g) {
    optim_with_states(op, [&](auto* s1, auto* s2) {
      switch (op.kind) {
        case OptimOpKind::kAdamWMoments:
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) adamw_moments_at<float>(s1, s2, g, i, adamw);
          return;
        case OptimOpKind::kAdamWFused:
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) adamw_update_at(w, s1, s2, g, i, adamw);
          return;
        case OptimOpKind::kSgdBuf:
          if (sgd.momentum == 0.0f) return;
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) sgd_buf_at(w, s1, g, i, sgd);
          return;
        case OptimOpKind::kSgdParam:
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) sgd_param_at(w, s1, g, i, sgd);
          return;
        case OptimOpKind::kSgdFused:
          if (sgd.momentum == 0.0f) {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) sgd_update_plain_at(w, g, i, sgd);
          } else {
#pragma omp simd
            for (int64_t i = 0; i < n; ++i) sgd_update_momentum_at(w, s1, g, i, sgd);
          }
          return;
        default:
          LLM_ASSERT(false, "optimizer piece of a kind that is not element-wise: ",
                     static_cast<int>(op.kind));
      }
    });
  });
}
