// Validation of the [model] section.
#include "model/model_config.h"

#include <cmath>
#include <vector>

#include "model/base/check.h"

namespace ledgerlm {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kMlp:
      return "mlp";
    case Recompute::kBlock:
      return "block";
  }
  return "?";
}

Recompute recompute_parse(const std::string& text) {
  if (text == "none") return Recompute::kNone;
  if (text == "mlp") return Recompute::kMlp;
  if (text == "block") return Recompute::kBlock;
  fail("model.recompute: expected none, mlp or block (got '" + text + "')");
}

const char* mlp_name(MlpKind k) {
  switch (k) {
    case MlpKind::kGelu:
      return "gelu";
    case MlpKind::kSwiglu:
      return "swiglu";
    case MlpKind::kRelu2:
      return "relu2";
  }
  return "?";
}

MlpKind mlp_parse(const std::string& text) {
  if (text == "gelu") return MlpKind::kGelu;
  if (text == "swiglu") return MlpKind::kSwiglu;
  if (text == "relu2") return MlpKind::kRelu2;
  fail("model.mlp: expected gelu, swiglu or relu2 (got '" + text + "')");
}

int64_t swiglu_default_width(int64_t n_embd) {
  const int64_t two_thirds = 2 * 4 * n_embd / 3;  // int(2 * 4C / 3), as Llama's code
  return (two_thirds + 255) / 256 * 256;
}

void ModelConfig::validate() const {
  LLM_REQUIRE(vocab_size > 0 && vocab_size <= kMaxVocab, "model.vocab_size: expected 1..",
              kMaxVocab, " (token ids and logit rows are 32-bit; got ", vocab_size, ")");
  LLM_REQUIRE(n_layer > 0 && n_layer <= kMaxLayers, "model.n_layer: expected 1..", kMaxLayers,
              " (the parameter table numbers its tensors with 32-bit ints; got ", n_layer, ")");
  LLM_REQUIRE(n_head > 0, "model.n_head: expected > 0 (got ", n_head, ")");
  LLM_REQUIRE(n_embd > 0 && n_embd % n_head == 0,
              "model.n_embd: expected a positive multiple of model.n_head=", n_head, " (got ",
              n_embd, ")");
  LLM_REQUIRE(n_embd <= kMaxEmbd, "model.n_embd: expected at most ", kMaxEmbd,
              " (GEMM dimensions are 32-bit; got ", n_embd, ")");
  LLM_REQUIRE(ffn_hidden >= 0 && ffn_hidden <= kMaxFfnHidden,
              "model.ffn_hidden: expected 0 (4 x model.n_embd) or 1..", kMaxFfnHidden,
              " (the MLP's hidden width; GEMM dimensions are 32-bit; got ", ffn_hidden, ")");
  LLM_REQUIRE(block_size > 0 && block_size <= kMaxBlockSize, "model.block_size: expected 1..",
              kMaxBlockSize, " (got ", block_size, ")");
  LLM_REQUIRE(dropout >= 0.0 && dropout < 1.0, "model.dropout: expected in [0, 1) (got ", dropout,
              ")");
  recompute_parse(recompute);
  mlp_parse(mlp);
  LLM_REQUIRE(ffn_width() <= kMaxFfnHidden, "model.ffn_hidden: the MLP's width ", ffn_width(),
              " is more than ", kMaxFfnHidden, " (set model.ffn_hidden)");
  LLM_REQUIRE(std::isfinite(logit_softcap) && logit_softcap >= 0.0,
              "model.logit_softcap: expected 0 (off) or a positive cap on the logits (got ",
              logit_softcap, ")");
  lora.validate(n_embd);
  LLM_REQUIRE(!lora.enabled() || mlp_kind() == MlpKind::kSwiglu ||
                  !lora.targets_layer(lora_target_name(kLoraGate)),
              "lora.targets: 'gate' adapts the gated MLP's gate projection, which model.mlp = ",
              mlp, " does not have (expected model.mlp = swiglu)");
  // Attention variants.
  LLM_REQUIRE(position == "learned" || position == "rope",
              "model.position: expected learned or rope (got '", position, "')");
  LLM_REQUIRE(std::isfinite(rope_theta) && rope_theta > 1.0,
              "model.rope_theta: expected a finite base > 1 (got ", rope_theta, ")");
  LLM_REQUIRE(!rope() || head_dim() % 2 == 0,
              "model.position = rope: expected an even head_dim (model.n_embd / model.n_head = ",
              head_dim(), ")");
  LLM_REQUIRE(n_kv_head >= 0 && n_kv_head <= n_head && (n_kv_head == 0 || n_head % n_kv_head == 0),
              "model.n_kv_head: expected 0 (model.n_head) or a divisor of model.n_head=", n_head,
              " (got ", n_kv_head, ")");
  LLM_REQUIRE(norm == "layernorm" || norm == "rmsnorm",
              "model.norm: expected layernorm or rmsnorm (got '", norm, "')");
  LLM_REQUIRE(std::isfinite(norm_eps) && norm_eps > 0.0 && norm_eps <= 1.0,
              "model.norm_eps: expected in (0, 1] (got ", norm_eps, ")");
}

const char* lora_target_name(int site) {
  static constexpr const char* kNames[kLoraSites] = {"qkv", "attn_proj", "mlp_fc", "mlp_proj",
                                                     "q",   "k",         "v",      "gate"};
  LLM_ASSERT(site >= 0 && site < kLoraSites, "LoRA site ", site);
  return kNames[site];
}

namespace {
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    out.push_back(a == std::string::npos ? "" : item.substr(a, b - a + 1));
    start = end + 1;
  }
  return out;
}

// Hugging Face Llama's module names that are other names of GPT-2's sites: o is the attention
// output (attn_proj), up and down the MLP's (mlp_fc, mlp_proj). (q, k, v and gate are sites of
// their own.)
struct LlamaAlias {
  const char* name;
  int site;
};
constexpr LlamaAlias kLlamaAliases[] = {{"o", kLoraProj}, {"up", kLoraFc}, {"down", kLoraFcproj}};

// The site a lora.targets item names, or -1.
int target_site(const std::string& t) {
  for (int s = 0; s < kLoraSites; ++s)
    if (t == lora_target_name(s)) return s;
  for (const LlamaAlias& l : kLlamaAliases)
    if (t == l.name) return l.site;
  return -1;
}
}  // namespace

bool LoraConfig::targets_layer(const std::string& target) const {
  for (const std::string& t : split_list(targets)) {
    const int site = target_site(t);
    if (site >= 0 && target == lora_target_name(site)) return true;
  }
  return false;
}

void LoraConfig::validate(int64_t n_embd) const {
  LLM_REQUIRE(rank >= 0 && rank <= n_embd,
              "lora.rank: expected 0 (off) or 1..model.n_embd=", n_embd, " (got ", rank, ")");
  if (rank == 0) return;
  LLM_REQUIRE(std::isfinite(alpha) && alpha > 0, "lora.alpha: expected > 0 (got ", alpha, ")");
  LLM_REQUIRE(dropout >= 0.0 && dropout < 1.0, "lora.dropout: expected in [0, 1) (got ", dropout,
              ")");
  const std::string list =
      "qkv, attn_proj, mlp_fc, mlp_proj or Llama's names q, k, v, o, gate, up, down";
  for (const std::string& t : split_list(targets))
    LLM_REQUIRE(target_site(t) >= 0, "lora.targets: '", t,
                "' is not a layer: expected a comma-separated list of ", list);
  // qkv's one adapter and q/k/v's own adapters would adapt the same rows twice.
  const bool separate = targets_layer(lora_target_name(kLoraQ)) ||
                        targets_layer(lora_target_name(kLoraK)) ||
                        targets_layer(lora_target_name(kLoraV));
  LLM_REQUIRE(!(separate && targets_layer(lora_target_name(kLoraQkv))),
              "lora.targets: qkv (one adapter on the fused q, k, v projection) and q, k or v (an "
              "adapter each on its rows) adapt the same weights: name one or the other (got '",
              targets, "')");
}

}  // namespace ledgerlm
