// The block forward shared by training and decoding (see gpt_block.h).
#include "model/gpt_block.h"

#include "model/backend/common/op_constants.h"

namespace ledgerlm {

BlockWidths block_widths(const BlockRecipe& recipe) {
  auto out_rows = [&](BlockRole r) {
    return recipe_shape(recipe.sizes, recipe.block[static_cast<size_t>(r)])[0];
  };
  BlockWidths w;
  w.C = recipe.sizes.C;
  w.qkv = out_rows(kRoleQkvWeight);
  w.F = out_rows(kRoleFcWeight);
  w.mlp = recipe.mlp;
  w.H = recipe.sizes.H;
  w.KV = recipe.sizes.KV;
  w.hd = recipe.sizes.head_dim;
  w.attention = recipe.attention;
  w.rms_norm = recipe.rms_norm;
  w.norm_eps = recipe.norm_eps;
  return w;
}

void gpt_block_qk_forward(Backend& be, const BlockActs& x, int64_t rows, BlockHooks::Positions pos,
                          const BlockWidths& w) {
  // q's H heads and k's KV heads are adjacent at the start of each qkv row.
  const int64_t heads = w.H + w.KV;
  if (w.attention.qk_norm)
    be.head_rmsnorm_forward(x.qkv, x.qk_rstd, rows, heads, w.hd, w.qkv, kQkNormEps);
  if (w.attention.rope)
    be.rope(x.qkv, rows, pos.seq, pos.pos0, heads, w.hd, w.qkv, w.attention.rope_theta, false);
}

void gpt_block_qk_backward(Backend& be, Tensor dqkv, const BlockActs& x, int64_t rows,
                           BlockHooks::Positions pos, const BlockWidths& w) {
  const int64_t heads = w.H + w.KV;
  if (w.attention.qk_norm)
    be.head_rmsnorm_backward(dqkv, x.qkv, x.qk_rstd, rows, heads, w.hd, w.qkv);
  if (w.attention.rope)
    be.rope(dqkv, rows, pos.seq, pos.pos0, heads, w.hd, w.qkv, w.attention.rope_theta, true);
}

// model.norm
bool block_norm_is_gpt2(const BlockWidths& w, const Tensor& weight, const Tensor& bias) {
  return !w.rms_norm && w.norm_eps == kLayerNormEps && !weight.empty() && !bias.empty();
}

void block_norm_forward(Backend& be, const BlockWidths& w, Tensor out, Tensor mean, Tensor rstd,
                        Tensor x, Tensor weight, Tensor bias, int64_t rows, Tensor a, Tensor b) {
  const bool fused = !a.empty();
  if (block_norm_is_gpt2(w, weight, bias)) {
    if (fused)
      be.add_layernorm_forward(x, out, mean, rstd, a, b, weight, bias, rows, w.C);
    else
      be.layernorm_forward(out, mean, rstd, x, weight, bias, rows, w.C);
    return;
  }
  if (fused) be.add(x, a, b, rows * w.C);
  be.norm_forward(out, mean, rstd, x, weight, bias, NormArgs{w.rms_norm, w.norm_eps, rows, w.C});
}

void block_norm_backward(Backend& be, const BlockWidths& w, Tensor dx, Tensor dweight, Tensor dbias,
                         Tensor dout, Tensor x, Tensor weight, Tensor bias, Tensor mean,
                         Tensor rstd, int64_t rows) {
  if (block_norm_is_gpt2(w, weight, bias)) {
    be.layernorm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd, rows, w.C);
    return;
  }
  be.norm_backward(dx, dweight, dbias, dout, x, weight, mean, rstd,
                   NormArgs{w.rms_norm, w.norm_eps, rows, w.C});
}

void gpt_block_mlp_hidden(Backend& be, BlockHooks& hooks, const BlockTensors& p, const BlockActs& x,
                          int64_t rows, const BlockWidths& w) {
  hooks.linear(kLoraFc, x.fch, x.ln2, p[kRoleFcWeight], p[kRoleFcBias], w.C, w.F);
  switch (w.mlp) {
    case MlpKind::kGelu:
      be.gelu_forward(x.fch_gelu, x.fch, rows * w.F);
      break;
    case MlpKind::kRelu2:
      be.relu2_forward(x.fch_gelu, x.fch, rows * w.F);
      break;
    case MlpKind::kSwiglu:  // down(silu(gate x) * up x): fch holds up x
      hooks.linear(kLoraGate, x.fch_gate, x.ln2, p[kRoleFcGateWeight], p[kRoleFcGateBias], w.C,
                   w.F);
      be.swiglu_forward(x.fch_gelu, x.fch_gate, x.fch, rows * w.F);
      break;
  }
}

void gpt_block_forward(Backend& be, BlockHooks& hooks, const BlockTensors& p, const BlockActs& x,
                       Tensor res_in, Tensor res_out, Tensor proj, int64_t rows,
                       const BlockWidths& w) {
  const int64_t C = w.C;
  // Attention: res2 = res_in + drop(proj(attn(qkv(ln1(res_in)))))
  block_norm_forward(be, w, x.ln1, x.ln1_mean, x.ln1_rstd, res_in, p[kRoleLn1Weight],
                     p[kRoleLn1Bias], rows);
  hooks.linear(kLoraQkv, x.qkv, x.ln1, p[kRoleQkvWeight], p[kRoleQkvBias], C, w.qkv);
  gpt_block_qk_forward(be, x, rows, hooks.positions(), w);
  hooks.attention(x);
  hooks.linear(kLoraProj, proj, x.atty, p[kRoleAttnProjWeight], p[kRoleAttnProjBias], C, C);
  hooks.branch_dropout(proj, BlockBranch::kAttention);
  block_norm_forward(be, w, x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, p[kRoleLn2Weight],
                     p[kRoleLn2Bias], rows, res_in, proj);
  // MLP: res_out = res2 + drop(proj(act(fc(ln2(res2))))), act per model.mlp
  gpt_block_mlp_hidden(be, hooks, p, x, rows, w);
  hooks.linear(kLoraFcproj, proj, x.fch_gelu, p[kRoleFcProjWeight], p[kRoleFcProjBias], w.F, C);
  hooks.branch_dropout(proj, BlockBranch::kMlp);
  be.add(res_out, x.res2, proj, rows * C);
}

}  // namespace ledgerlm
