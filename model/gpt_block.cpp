// The block forward shared by training and decoding (see gpt_block.h).
#include "model/gpt_block.h"

#include "model/backend/common/op_constants.h"

namespace ledgerlm {

BlockWidths block_widths(const BlockRecipe& recipe) {
  auto out_rows = [&](BlockRole r) {
    return recipe_shape(recipe.sizes, recipe.block[static_cast<size_t>(r)])[0];
  };
  BlockWidths w{recipe.sizes.C, out_rows(kRoleQkvWeight), out_rows(kRoleFcWeight)};
  w.rms_norm = recipe.rms_norm;
  w.norm_eps = recipe.norm_eps;
  return w;
}

// model.norm (issue 41)
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
  be.gelu_forward(x.fch_gelu, x.fch, rows * w.F);
}

void gpt_block_forward(Backend& be, BlockHooks& hooks, const BlockTensors& p, const BlockActs& x,
                       Tensor res_in, Tensor res_out, Tensor proj, int64_t rows,
                       const BlockWidths& w) {
  const int64_t C = w.C;
  // Attention: res2 = res_in + drop(proj(attn(qkv(ln1(res_in)))))
  block_norm_forward(be, w, x.ln1, x.ln1_mean, x.ln1_rstd, res_in, p[kRoleLn1Weight],
                     p[kRoleLn1Bias], rows);
  hooks.linear(kLoraQkv, x.qkv, x.ln1, p[kRoleQkvWeight], p[kRoleQkvBias], C, w.qkv);
  hooks.attention(x);
  hooks.linear(kLoraProj, proj, x.atty, p[kRoleAttnProjWeight], p[kRoleAttnProjBias], C, C);
  hooks.branch_dropout(proj, BlockBranch::kAttention);
  block_norm_forward(be, w, x.ln2, x.ln2_mean, x.ln2_rstd, x.res2, p[kRoleLn2Weight],
                     p[kRoleLn2Bias], rows, res_in, proj);
  // MLP: res_out = res2 + drop(proj(gelu(fc(ln2(res2)))))
  gpt_block_mlp_hidden(be, hooks, p, x, rows, w);
  hooks.linear(kLoraFcproj, proj, x.fch_gelu, p[kRoleFcProjWeight], p[kRoleFcProjBias], w.F, C);
  hooks.branch_dropout(proj, BlockBranch::kMlp);
  be.add(res_out, x.res2, proj, rows * C);
}

}  // namespace ledgerlm
