// One block's forward, written once. The training forward (gpt.cpp: B*T rows, activations kept
// for backward, dropout, LoRA adapters) and KV-cache decoding (gpt_decode.cpp: one row, attention
// over the cache) both run it; what differs between them comes in through BlockHooks.
#pragma once

#include <array>
#include <cstdint>

#include "model/backend/backend.h"
#include "model/block_recipe.h"

namespace ledgerlm {

// A block's tensors (weights, or their gradients), by BlockRole.
using BlockTensors = std::array<Tensor, kBlockRoles>;

// The activations of one block's forward (row-major, `rows` rows each): what its backward reads.
struct BlockActs {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, atty, lse, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
  // model.mlp = swiglu: the gate projection's output (fch is then the up projection's and
  // fch_gelu the gated product silu(gate) * up); empty for the other MLPs.
  Tensor fch_gate;
  // model.qk_norm: the rstd of each q and k head [rows, H + KV] (empty without it).
  Tensor qk_rstd;
};

// The widths of a block's linear layers, from the recipe: C in and out of the block, the fused
// q, k, v projection's output and the MLP's hidden width F.
struct BlockWidths {
  int64_t C = 0, qkv = 0, F = 0;
  MlpKind mlp = MlpKind::kGelu;  // model.mlp
  // Attention: query heads H, k/v heads KV (grouped-query: fewer), head_dim, and what runs
  // between the qkv projection and attention (the recipe's Attention: QK-norm, then rope).
  int64_t H = 0, KV = 0, hd = 0;
  BlockRecipe::Attention attention;
  // model.norm: the norms' kind and eps (BlockRecipe::rms_norm, norm_eps).
  bool rms_norm = false;
  double norm_eps = 1e-5;
};

// model.norm: the norm `out = norm(x) * weight + bias` over `rows` rows of C (mean
// unused by RMSNorm; weight or bias empty where the model has none). GPT-2's LayerNorm (weight,
// bias, eps 1e-5) runs layernorm_forward, everything else norm_forward; with `a` and `b`, x = a +
// b is written first (add_layernorm_forward's fused residual add for GPT-2's norm).
void block_norm_forward(Backend& be, const BlockWidths& w, Tensor out, Tensor mean, Tensor rstd,
                        Tensor x, Tensor weight, Tensor bias, int64_t rows, Tensor a = Tensor(),
                        Tensor b = Tensor());
// Its backward: dx += ...; the weight and bias gradients += where `dweight` / `dbias` are not
// empty. GPT-2's LayerNorm needs both (layernorm_backward writes them): its caller passes sinks
// for frozen ones.
void block_norm_backward(Backend& be, const BlockWidths& w, Tensor dx, Tensor dweight, Tensor dbias,
                         Tensor dout, Tensor x, Tensor weight, Tensor bias, Tensor mean,
                         Tensor rstd, int64_t rows);
// Whether block_norm_* run GPT-2's LayerNorm kernels for a norm with this weight and bias.
bool block_norm_is_gpt2(const BlockWidths& w, const Tensor& weight, const Tensor& bias);
BlockWidths block_widths(const BlockRecipe& recipe);

// The residual branch a dropout acts on.
enum class BlockBranch : uint8_t { kAttention, kMlp };

class BlockHooks {
 public:
  virtual ~BlockHooks() = default;
  // out = in W^T + bias for the linear layer at LoRA site `site` (its adapter added, if any;
  // site -1: a layer no adapter targets, SwiGLU's gate).
  virtual void linear(int site, Tensor out, Tensor in, Tensor w, Tensor bias, int64_t in_f,
                      int64_t out_f) = 0;
  // Causal self-attention: x.atty from x.qkv (and whatever backward keeps, x.lse).
  virtual void attention(const BlockActs& x) = 0;
  // Dropout on a residual branch before it joins the stream (training only).
  virtual void branch_dropout(Tensor /*branch*/, BlockBranch /*which*/) {}
  // The positions of the rows (rotary embedding): row r is position pos0 + r % seq.
  struct Positions {
    int64_t seq = 1, pos0 = 0;
  };
  virtual Positions positions() const = 0;
};

// model.qk_norm and model.position = rope on x.qkv's q and k heads, in place (forward), and
// their backward on dqkv (the gradient of the attention's input becomes that of the projection's
// output): the norm's backward runs on the rotated values (the rotation keeps the dot products it
// needs), then the inverse rotation.
void gpt_block_qk_forward(Backend& be, const BlockActs& x, int64_t rows, BlockHooks::Positions pos,
                          const BlockWidths& w);
void gpt_block_qk_backward(Backend& be, Tensor dqkv, const BlockActs& x, int64_t rows,
                           BlockHooks::Positions pos, const BlockWidths& w);

// res_out = the block applied to res_in over `rows` positions; `proj` is scratch of (rows, C) for
// the branches' outputs. res_in and x.res2 must not alias; res_out may alias res_in.
void gpt_block_forward(Backend& be, BlockHooks& hooks, const BlockTensors& p, const BlockActs& x,
                       Tensor res_in, Tensor res_out, Tensor proj, int64_t rows,
                       const BlockWidths& w);
// The MLP's hidden activations (x.fch, x.fch_gelu, and SwiGLU's x.fch_gate) from x.ln2: the part
// of the forward that model.recompute = mlp runs again in backward.
void gpt_block_mlp_hidden(Backend& be, BlockHooks& hooks, const BlockTensors& p, const BlockActs& x,
                          int64_t rows, const BlockWidths& w);

}  // namespace ledgerlm
