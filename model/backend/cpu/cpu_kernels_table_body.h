// The kernel table of a vector path, built from the bodies included before it (cpu_kernels_body.h,
// cpu_mlp_act_body.h, cpu_softcap_body.h, cpu_attention_tiles_body.h, cpu_attention_head.h,
// cpu_layernorm_rows.h, cpu_rmsnorm_rows.h, cpu_mlp_act_loops.h). Include last, inside the ISA
// unit's kernel namespace; `kIsa` names the path.

void k_layernorm_forward(const LayerNormRows& r) {
  ln_forward_rows<float>(r.out, r.mean, r.rstd, r.add_a ? r.sum : const_cast<float*>(r.x), r.add_a,
                         r.add_b, r.w, r.b, r.begin, r.end, r.c, static_cast<float>(kLayerNormEps));
}

void k_layernorm_backward(const LayerNormRows& r) {
  ln_backward_rows<float>(r.dx, r.dw, r.db, r.dout, r.x, r.w, r.mean, r.rstd, r.begin, r.end, r.c);
}

// The vector products need whole vectors per head row.
bool k_attention_vector(int64_t head_dim) {
  return head_dim > 0 && head_dim % Vec::kLanes == 0;
}

void k_attention_forward_head(const AttnForwardHead& a, int64_t bh, float* scratch) {
  if (!k_attention_vector(a.shape.hd)) return attention_forward_head_blas(a, bh, scratch);
  attn_forward_head<float, VecProducts>(a.out, a.lse, a.qkv, *a.args, a.shape, bh, scratch);
}

void k_attention_backward_head(const AttnBackwardHead& a, int64_t bh, float* scratch) {
  if (!k_attention_vector(a.shape.hd)) return attention_backward_head_blas(a, bh, scratch);
  attn_backward_head<float, VecProducts>(a.dqkv, a.dout, a.qkv, a.out, a.lse, *a.args, a.shape, bh,
                                         scratch);
}

const CpuKernels kTable = {kIsa,
                           Vec::kLanes,
                           k_gelu_forward,
                           k_gelu_backward,
                           k_row_max,
                           k_exp_sum_row,
                           k_scale_row,
                           k_bf16_to_f32,
                           k_f32_to_bf16,
                           k_f16_to_f32,
                           k_f32_to_f16,
                           k_layernorm_forward,
                           k_layernorm_backward,
                           k_swiglu_forward,
                           k_swiglu_backward,
                           relu2_forward_loop<float>,
                           relu2_backward_loop<float>,
                           k_softcap_forward,
                           k_softcap_grad_row,
                           rms_forward_rows<float>,
                           rms_backward_rows<float>,
                           k_attention_vector,
                           k_attention_forward_head,
                           k_attention_backward_head};
