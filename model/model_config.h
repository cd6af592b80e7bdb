// GPT-2 architecture settings: the [model] section of a config.
#pragma once

#include <cstdint>
#include <string>

namespace ledgerlm {

enum class Recompute : uint8_t { kNone, kMlp, kBlock };
const char* recompute_name(Recompute r);
Recompute recompute_parse(const std::string& text);  // throws Error naming model.recompute

// Low-rank adapters (the [lora] section): each targeted linear layer y = x W^T + b gains
// y += (alpha / rank) * drop(x) A^T B^T with A (rank, in) and B (out, rank) trained and the base
// weights frozen. rank = 0: no adapters.
struct LoraConfig {
  int64_t rank = 0;
  double alpha = 16.0;
  double dropout = 0.0;  // on the adapter's input only
  // Comma-separated, from: qkv (one adapter on the fused attention input projection), attn_proj,
  // mlp_fc, mlp_proj; Llama's module names q, k, v (an adapter each, on the fused projection's
  // rows of q, k or v), o (= attn_proj), gate (the gated MLP's gate projection), up (= mlp_fc),
  // down (= mlp_proj).
  std::string targets = "qkv";

  bool enabled() const { return rank > 0; }
  double scale() const { return alpha / static_cast<double>(rank); }
  bool targets_layer(const std::string& target) const;  // `target` is in `targets`
  void validate(int64_t n_embd) const;                  // throws Error naming the lora.* key
};

// The adapters a block can have, in the order their factors follow the base tensors in the
// table; the block recipe (block_recipe.h) says which weight (and which of its rows) each adapts.
// q, k, v and gate come after GPT-2's four so that a run targeting only those keeps its table.
enum LoraSite : int {
  kLoraQkv,
  kLoraProj,
  kLoraFc,
  kLoraFcproj,
  kLoraQ,  // the fused qkv projection's rows of q, k and v, an adapter each
  kLoraK,
  kLoraV,
  kLoraGate,  // model.mlp = swiglu: the gate projection
  kLoraSites
};
// "qkv", "attn_proj", "mlp_fc", "mlp_proj", "q", "k", "v", "gate"
const char* lora_target_name(int site);

// Largest accepted sizes: what the model's indices and GEMM dimensions represent. A table row
// index is an int and a block holds at most 30 tensors (14 roles plus 16 LoRA factors), so 7e7
// blocks stay below 2^31 rows; the MLP width F and the padded vocab are GEMM dimensions (32-bit
// in BLAS).
constexpr int64_t kMaxLayers = 70000000;
constexpr int64_t kMaxEmbd = int64_t{1} << 20;
constexpr int64_t kMaxBlockSize = int64_t{1} << 24;
constexpr int64_t kMaxVocab = int64_t{1} << 30;
constexpr int64_t kMaxFfnHidden = int64_t{1} << 22;
// model.qk_norm's epsilon (inside the square root, as Qwen3's and OLMo-2's q/k norms).
constexpr double kQkNormEps = 1e-6;

// The MLP variants of model.mlp.
enum class MlpKind : uint8_t { kGelu, kSwiglu, kRelu2 };
const char* mlp_name(MlpKind k);
MlpKind mlp_parse(const std::string& text);  // throws Error naming model.mlp
// SwiGLU's default width when model.ffn_hidden = 0: Llama's rule, int(2/3 x 4C) rounded up to a
// multiple of 256 (its multiple_of): C = 576 gives 1536 (SmolLM2-135M), C = 4096 gives 11008.
int64_t swiglu_default_width(int64_t n_embd);

struct ModelConfig {
  int64_t vocab_size = 0;  // 0: taken from the prepared data (meta.json)
  int64_t n_layer = 4;
  int64_t n_head = 4;
  int64_t n_embd = 128;
  int64_t block_size = 256;        // context length: the longest sequence the model accepts
  double dropout = 0.0;            // attention and residual dropout probability
  std::string recompute = "none";  // none | mlp | block (activation checkpointing)
  LoraConfig lora;                 // the [lora] section: adapters change the parameter table
  // The MLP's hidden width F (GPT-2's n_inner); 0: 4 x n_embd, GPT-2's own. Read it through
  // ffn_width(). (Last, so that positional initialisers of the fields above keep their meaning.)
  int64_t ffn_hidden = 0;
  // ---- MLP variants, the head and its soft-cap (appended: positional initialisers above) ----
  // The MLP: gelu (GPT-2: proj(gelu_tanh(fc x))), swiglu (Llama: down(silu(gate x) * up x)) or
  // relu2 (modded-nanogpt: proj(relu(fc x)^2)). Read it through mlp_kind().
  std::string mlp = "gelu";
  // true: the head reuses the token embedding (GPT-2); false: its own (padded_vocab, C) matrix,
  // the final unit's lm_head.
  bool tie_embeddings = true;
  // > 0: the logits become cap * tanh(logits / cap) before the loss and sampling; 0: off.
  double logit_softcap = 0.0;
  // Attention variants, appended for the same reason. position: learned (GPT-2's
  // wpe table) or rope (rotary q and k, Hugging Face Llama's half-split pairs, base rope_theta);
  // n_kv_head: heads of k and v (0: n_head; fewer: grouped-query, 1: multi-query attention);
  // qk_norm: a weightless RMS norm over each head's head_dim of q and k, before the rotation.
  std::string position = "learned";
  double rope_theta = 10000.0;
  int64_t n_kv_head = 0;
  bool qk_norm = false;
  // model.norm: the block's norms and the final one. layernorm (GPT-2):
  // (x - mean) * rstd * weight + bias; rmsnorm (Llama): x * rstd * weight with rstd over the mean
  // of squares, never a bias. norm_weight = false drops the learnable weight (a weightless norm);
  // norm_eps is added to the variance (layernorm) or the mean square (rmsnorm) under the root.
  std::string norm = "layernorm";
  bool norm_weight = true;
  double norm_eps = 1e-5;
  // Biases: `bias` on every linear layer and on LayerNorm; `qkv_bias` (Qwen2) keeps the fused q,
  // k, v projection's bias when `bias` is false.
  bool bias = true;
  bool qkv_bias = false;

  int64_t head_dim() const { return n_embd / n_head; }
  // Heads of k and v: model.n_kv_head, or n_head when it is 0.
  int64_t kv_heads() const { return n_kv_head > 0 ? n_kv_head : n_head; }
  bool rope() const { return position == "rope"; }
  // The MLP's hidden width F: model.ffn_hidden, or 4 x n_embd when it is 0.
  int64_t ffn_width() const {
    return ffn_hidden > 0 ? ffn_hidden
                          : (mlp == "swiglu" ? swiglu_default_width(n_embd) : 4 * n_embd);
  }
  MlpKind mlp_kind() const { return mlp_parse(mlp); }
  // Vocab rounded up to a multiple of 64 for GEMM shape; padded logits get no probability mass.
  bool rms_norm() const { return norm == "rmsnorm"; }
  // Which optional tensors the block has: the norms' weight and bias, the linear layers' biases.
  bool has_norm_weight() const { return norm_weight; }
  bool has_norm_bias() const { return bias && !rms_norm(); }
  bool has_qkv_bias() const { return bias || qkv_bias; }
  // Today's GPT-2 norm: LayerNorm with weight, bias and eps 1e-5 (the fused kernels' case).
  bool gpt2_norm() const { return !rms_norm() && norm_weight && bias && norm_eps == 1e-5; }
  int64_t padded_vocab() const { return (vocab_size + 63) / 64 * 64; }
  // Throws Error naming the offending key ("model.n_head ...").
  void validate() const;
};

}  // namespace ledgerlm
