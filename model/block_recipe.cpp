// GPT-2's recipe (see block_recipe.h).
#include "model/block_recipe.h"

#include <algorithm>

#include "model/base/check.h"

namespace ledgerlm {
namespace {

constexpr RecipeDim kC{1, 0, 0, 0, 0};
constexpr RecipeDim kF{0, 0, 1, 0, 0};
constexpr RecipeDim kQkv{1, 2, 0, 0, 0};  // q (C) then k and v (KV heads x head_dim each)
constexpr RecipeDim kVocab{0, 0, 0, 1, 0};
constexpr RecipeDim kPositions{0, 0, 0, 0, 1};

TensorRole role(const char* name, std::vector<RecipeDim> shape, ParamKind kind, InitKind init,
                InitScale scale, const char* hf_name, bool hf_transpose) {
  TensorRole r;
  r.name = name;
  r.shape = std::move(shape);
  r.kind = kind;
  r.init = init;
  r.scale = scale;
  r.hf_name = hf_name;
  r.hf_transpose = hf_transpose;
  return r;
}

// A norm's weight (ones) and bias (zeros), each present as the config says.
void norm(std::vector<TensorRole>* out, const char* name, const char* hf, const ModelConfig& cfg) {
  out->push_back(role((std::string(name) + ".weight").c_str(), {kC}, ParamKind::kNormWeight,
                      InitKind::kOnes, InitScale::kNone, (std::string(hf) + ".weight").c_str(),
                      false));
  out->back().present = cfg.has_norm_weight();
  out->push_back(role((std::string(name) + ".bias").c_str(), {kC}, ParamKind::kBias,
                      InitKind::kZeros, InitScale::kNone, (std::string(hf) + ".bias").c_str(),
                      false));
  out->back().present = cfg.has_norm_bias();
}

// A linear layer (out, in) and its bias (out), Conv1D in HF; `site` its LoRA site.
void linear(BlockRecipe* r, const char* name, RecipeDim out, RecipeDim in, InitScale scale,
            const char* hf, int site, bool bias, int split = 1) {  // site -1: no adapter
  std::vector<TensorRole>& b = r->block;
  b.push_back(role((std::string(name) + ".weight").c_str(), {out, in}, ParamKind::kMatrix,
                   InitKind::kNormal, scale, (std::string(hf) + ".weight").c_str(), true));
  b.back().split = split;
  if (site >= 0) {
    r->lora_sites[site].role = static_cast<int>(b.size()) - 1;
    r->lora_sites[site].stem = name;
  }
  b.push_back(role((std::string(name) + ".bias").c_str(), {out}, ParamKind::kBias, InitKind::kZeros,
                   InitScale::kNone, (std::string(hf) + ".bias").c_str(), false));
  b.back().present = bias;
}

}  // namespace

RecipeSizes recipe_sizes(const ModelConfig& c) {
  RecipeSizes s;
  s.C = c.n_embd;
  s.H = c.n_head;
  s.KV = c.kv_heads();  // n_head: every head has its own k and v; fewer: grouped-query
  s.head_dim = c.n_head > 0 ? c.n_embd / c.n_head : 0;
  s.F = c.ffn_width();
  s.vocab = c.vocab_size;
  s.padded_vocab = c.padded_vocab();
  s.positions = c.block_size;
  return s;
}

BlockRecipe block_recipe(const ModelConfig& config) {
  BlockRecipe r;
  r.sizes = recipe_sizes(config);
  r.rms_norm = config.rms_norm();
  r.norm_eps = config.norm_eps;
  r.embed.push_back(role("wte", {kVocab, kC}, ParamKind::kEmbedding, InitKind::kNormal,
                         InitScale::kBase, "wte.weight", false));
  r.embed.back().hf_real_vocab_rows = true;
  if (!config.rope())  // rotary positions need no table
    r.embed.push_back(role("wpe", {kPositions, kC}, ParamKind::kEmbedding, InitKind::kNormal,
                           InitScale::kBase, "wpe.weight", false));
  r.attention.rope = config.rope();
  r.attention.rope_theta = config.rope_theta;
  r.attention.qk_norm = config.qk_norm;

  const bool bias = config.bias;
  norm(&r.block, "ln1", "ln_1", config);
  // Whole-matrix optimizers see the fused q, k, v as pieces of KV x head_dim rows: q, k and v with
  // every head its own k and v (3); with grouped-query attention q's query-head groups, then k, v.
  const int pieces =
      static_cast<int>(2 + (config.kv_heads() > 0 ? config.n_head / config.kv_heads() : 1));
  linear(&r, "attn.qkv", kQkv, kC, InitScale::kBase, "attn.c_attn", kLoraQkv, config.has_qkv_bias(),
         pieces);
  // q, k and v's own adapters on the fused projection's row blocks.
  const RecipeDim kKv{0, 1, 0, 0, 0};
  const struct {
    int site;
    const char* stem;
    RecipeDim row0, rows;
  } row_sites[] = {{kLoraQ, "attn.q", {}, kC},
                   {kLoraK, "attn.k", kC, kKv},
                   {kLoraV, "attn.v", {1, 1, 0, 0, 0}, kKv}};
  for (const auto& rs : row_sites)
    r.lora_sites[rs.site] = {kRoleQkvWeight, rs.stem, rs.row0, rs.rows};
  linear(&r, "attn.proj", kC, kC, InitScale::kResidual, "attn.c_proj", kLoraProj, bias);
  norm(&r.block, "ln2", "ln_2", config);
  // The MLP (model.mlp): GPT-2's fc and proj; SwiGLU's up and down beside its gate (LoRA's
  // mlp_fc and mlp_proj adapt up and down, gate the gate). HF GPT-2 cannot hold a gated
  // MLP: the export refuses it, the gate's HF name is Llama's.
  r.mlp = config.mlp_kind();
  const bool gated = r.mlp == MlpKind::kSwiglu;
  linear(&r, gated ? "mlp.up" : "mlp.fc", kF, kC, InitScale::kBase, "mlp.c_fc", kLoraFc, bias);
  linear(&r, gated ? "mlp.down" : "mlp.proj", kC, kF, InitScale::kResidual, "mlp.c_proj",
         kLoraFcproj, bias);
  linear(&r, "mlp.gate", kF, kC, InitScale::kBase, "mlp.gate_proj", kLoraGate, bias);
  r.block[kRoleFcGateWeight].present = gated;
  r.block[kRoleFcGateBias].present = gated && bias;
  LLM_ASSERT(r.block.size() == kBlockRoles, "the block's roles and BlockRole disagree");

  norm(&r.final, "lnf", "ln_f", config);
  // The untied head (model.tie_embeddings = false): its own (padded vocab, C) matrix in the final
  // unit, initialised as the token embedding is (its own draws), in the embedding group (AdamW's
  // lr multiplier, no Muon), padding rows zero.
  r.final.push_back(role("lm_head", {kVocab, kC}, ParamKind::kEmbedding, InitKind::kNormal,
                         InitScale::kBase, "lm_head.weight", false));
  r.final.back().hf_real_vocab_rows = true;
  r.final.back().hf_top_level = true;
  r.final.back().present = !config.tie_embeddings;
  LLM_ASSERT(
      r.embed.size() == (config.rope() ? kRoleWpe : kEmbedRoles) && r.final.size() == kFinalRoles,
      "the embedding and final roles and their enums disagree");
  return r;
}

std::vector<int64_t> recipe_shape(const RecipeSizes& sizes, const TensorRole& role) {
  std::vector<int64_t> shape;
  for (const RecipeDim& d : role.shape) shape.push_back(sizes.eval(d));
  return shape;
}

std::string recipe_block_name(const TensorRole& role, int64_t layer) {
  return "block." + std::to_string(layer) + "." + role.name;
}

std::string recipe_block_hf_name(const TensorRole& role, int64_t layer) {
  return "transformer.h." + std::to_string(layer) + "." + role.hf_name;
}

std::string recipe_embed_name(const TensorRole& role) {
  return "embed." + role.name;
}

std::string recipe_final_name(const TensorRole& role) {
  return "final." + role.name;
}

std::string recipe_unit_hf_name(const TensorRole& role) {
  return role.hf_top_level ? role.hf_name : "transformer." + role.hf_name;
}

std::string recipe_hf_module(const TensorRole& role) {
  const std::string suffix = ".weight";
  LLM_ASSERT(role.hf_name.size() > suffix.size(), role.name);
  return role.hf_name.substr(0, role.hf_name.size() - suffix.size());
}

LoraRows recipe_lora_rows(const BlockRecipe& recipe, int site) {
  const LoraSiteRecipe& s = recipe.lora_sites[site];
  LLM_ASSERT(s.role >= 0, "LoRA site ", site);
  if (s.whole()) return {0, recipe.sizes.eval(recipe.block[static_cast<size_t>(s.role)].shape[0])};
  return {recipe.sizes.eval(s.row0), recipe.sizes.eval(s.rows)};
}

int64_t recipe_widest_vector(const BlockRecipe& recipe) {
  int64_t widest = 0;
  for (const auto* roles : {&recipe.embed, &recipe.block, &recipe.final})
    for (const TensorRole& r : *roles)
      if (r.present && r.shape.size() == 1)
        widest = std::max(widest, recipe.sizes.eval(r.shape[0]));
  return widest;
}

}  // namespace ledgerlm
