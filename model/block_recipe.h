// The model declared once, as data: the tensors of the embedding unit, of one transformer block
// and of the final unit, in table order, each with its shape in the model's dimensions, its kind
// (what weight decay and whole-matrix optimizers key on), its init and its Hugging Face name; and
// the LoRA sites, each a weight (or a row block of one) that an adapter can adapt.
//
// The parameter table (param_table.cpp), the model's views of a block (param_refs, gpt.cpp), the
// Hugging Face import/export and the PEFT export read this list; none of them names a GPT-2
// tensor itself. A block variant (another norm, gated MLP, separate q/k/v projections) changes
// the roles here, the block's forward and backward (gpt_block.cpp, gpt.cpp) and the config keys
// that choose it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace ledgerlm {

// What a tensor is to the optimizers (the decay and Muon groups key on it) and to the init.
enum class ParamKind : uint8_t { kEmbedding, kMatrix, kBias, kNormWeight };
enum class InitKind : uint8_t { kNormal, kOnes, kZeros };

// One dimension as a sum of the model's sizes: c*C + kv*(KV heads x head_dim) + f*F + ...
// The fused q, k, v projection has c = 1 (q) and kv = 2 (k and v): with KV heads = H (GPT-2)
// that is 3C, and grouped-query attention narrows the kv part only.
struct RecipeDim {
  int c = 0;          // model width C (n_embd)
  int kv = 0;         // KV heads x head_dim (= C while every head has its own k and v)
  int f = 0;          // MLP hidden width F (model.ffn_hidden)
  int vocab = 0;      // padded vocab
  int positions = 0;  // block_size
};

// The sizes a recipe's dimensions are evaluated with.
struct RecipeSizes {
  int64_t C = 0, H = 0, KV = 0, head_dim = 0, F = 0, vocab = 0, padded_vocab = 0, positions = 0;
  int64_t eval(const RecipeDim& d) const {
    return d.c * C + d.kv * KV * head_dim + d.f * F + d.vocab * padded_vocab +
           d.positions * positions;
  }
};
RecipeSizes recipe_sizes(const ModelConfig& config);

// The init's scale: GPT-2's N(0, 0.02), the same scaled by 1/sqrt(2 n_layer) for the projections
// into the residual stream, or none (ones, zeros).
enum class InitScale : uint8_t { kNone, kBase, kResidual };

// Where the model's code finds a block tensor: the index of its role in the block's list. The
// enum names the roles the block forward uses; the list (block_roles) gives each its data.
enum BlockRole : int {
  kRoleLn1Weight,
  kRoleLn1Bias,
  kRoleQkvWeight,
  kRoleQkvBias,
  kRoleAttnProjWeight,
  kRoleAttnProjBias,
  kRoleLn2Weight,
  kRoleLn2Bias,
  kRoleFcWeight,
  kRoleFcBias,
  kRoleFcProjWeight,
  kRoleFcProjBias,
  // model.mlp = swiglu: the gate projection (F, C) and its bias; absent otherwise.
  kRoleFcGateWeight,
  kRoleFcGateBias,
  kBlockRoles
};

// The embedding unit's roles and the final unit's, likewise. With rotary positions
// (model.position = rope) the embedding unit holds wte only: embed.size() == kRoleWpe.
enum EmbedRole : int { kRoleWte, kRoleWpe, kEmbedRoles };
// kRoleLmHead: the untied head (model.tie_embeddings = false); absent when the head is tied.
enum FinalRole : int { kRoleLnfWeight, kRoleLnfBias, kRoleLmHead, kFinalRoles };

struct TensorRole {
  std::string name;              // in its unit: "ln1.weight" (block roles get "block.L." in front)
  std::vector<RecipeDim> shape;  // row-major; linear weights are (out, in)
  ParamKind kind = ParamKind::kMatrix;
  InitKind init = InitKind::kZeros;
  InitScale scale = InitScale::kNone;
  // Independent matrices stacked along the rows (the fused q, k, v: 3); whole-matrix optimizer
  // work treats each on its own.
  int split = 1;
  // Hugging Face GPT-2: the name ("h.L." roles get "transformer.h.L." in front), whether the
  // weight is stored transposed (Conv1D: (in, out)), and whether only the real vocab rows are
  // stored (the token embedding drops the padding).
  std::string hf_name;
  bool hf_transpose = false;
  bool hf_real_vocab_rows = false;
  // false: the configuration has no such tensor (a bias with model.bias = false, a weightless or
  // bias-free norm, the gate of a non-gated MLP, the head of a tied model). It keeps its place in
  // the role list (the enums index it) but the parameter table, the views and the exports skip
  // it, and the model's views of it are empty.
  bool present = true;
  // The HF name is the model's top level ("lm_head.weight"), not under "transformer.".
  bool hf_top_level = false;
};

// A LoRA site (model_config.h): the weight it adapts and which of its rows. GPT-2's sites and the
// gate adapt a whole weight; q, k and v each adapt their row block of the fused qkv projection
// (q rows [0, C), k the next KV x head_dim, v the last), with their own A and B.
struct LoraSiteRecipe {
  int role = -1;         // the adapted weight's BlockRole
  std::string stem;      // the factors' names in the block: "<stem>.lora_a" ("attn.q.lora_a")
  RecipeDim row0, rows;  // its first row and row count (rows all zero: the whole weight)
  bool whole() const { return rows.c == 0 && rows.kv == 0 && rows.f == 0; }
};

// The three kinds of unit, in table order: the embeddings, n_layer blocks, the final norm.
struct BlockRecipe {
  RecipeSizes sizes;
  std::vector<TensorRole> embed;  // "embed.<name>", HF "transformer.<hf_name>"
  std::vector<TensorRole> block;  // indexed by BlockRole
  std::vector<TensorRole> final;  // "final.<name>", HF "transformer.<hf_name>"
  // Each LoRA site's weight in `block` and the rows it adapts.
  LoraSiteRecipe lora_sites[kLoraSites];
  // The MLP's activation (model.mlp): what sits between fc (SwiGLU: gate and up) and proj.
  MlpKind mlp = MlpKind::kGelu;
  // Attention variants: what the block forward does between the qkv projection and attention
  // (a weightless RMS norm of each q and k head, then the rotation), and whether the embedding
  // unit has a position table.
  struct Attention {
    bool rope = false;
    double rope_theta = 10000.0;
    bool qk_norm = false;
  } attention;
  bool has_wpe() const { return embed.size() > kRoleWpe; }
  // model.norm: every norm of the model (the blocks' two and the final one) is RMSNorm or
  // LayerNorm with this eps; which of its weight and bias exist, the roles say.
  bool rms_norm = false;
  double norm_eps = 1e-5;
};

// The recipe of `config`'s model (GPT-2: pre-LayerNorm blocks, fused qkv, GELU MLP of width F;
// model.mlp = swiglu adds the gate and names the MLP's matrices gate, up and down; model.norm,
// model.norm_weight, model.bias and model.qkv_bias take norm weights and biases out).
BlockRecipe block_recipe(const ModelConfig& config);

// A role's shape in elements.
std::vector<int64_t> recipe_shape(const RecipeSizes& sizes, const TensorRole& role);
// The table name of block role `role` in layer `layer` ("block.3.attn.qkv.weight") and its HF
// name ("transformer.h.3.attn.c_attn.weight").
std::string recipe_block_name(const TensorRole& role, int64_t layer);
std::string recipe_block_hf_name(const TensorRole& role, int64_t layer);
// The same for the embedding unit ("embed.wte", "transformer.wte.weight") and the final unit
// ("final.lnf.weight", "transformer.ln_f.weight").
std::string recipe_embed_name(const TensorRole& role);
std::string recipe_final_name(const TensorRole& role);
std::string recipe_unit_hf_name(const TensorRole& role);
// The HF module a LoRA target adapts, as PEFT names it in target_modules ("attn.c_attn").
std::string recipe_hf_module(const TensorRole& role);
// LoRA site `site`'s adapted rows of its weight, [row0, row0 + rows), in elements.
struct LoraRows {
  int64_t row0 = 0, rows = 0;
};
LoraRows recipe_lora_rows(const BlockRecipe& recipe, int site);

// Elements of the recipe's largest one-dimensional tensor (norm weights, biases).
int64_t recipe_widest_vector(const BlockRecipe& recipe);

}  // namespace ledgerlm
