// The model's activation buffers as data (see activation_list.h).
#include "model/activation_list.h"

#include <algorithm>

#include "model/gpt_block.h"

namespace ledgerlm {

ActivationSpec activation_spec(const ModelConfig& config, int64_t batch, int64_t seq,
                               Recompute recompute, int64_t untrained_blocks, DType dtype) {
  ActivationSpec s;
  s.n_layer = config.n_layer;
  s.n_head = config.n_head;
  s.n_embd = config.n_embd;
  const BlockWidths widths = block_widths(block_recipe(config));
  s.qkv = widths.qkv;
  s.ffn = widths.F;
  s.padded_vocab = config.padded_vocab();
  s.batch = batch;
  s.seq = seq;
  s.recompute = recompute;
  s.untrained_blocks = untrained_blocks;
  s.dtype = dtype;
  s.lora_rank = config.lora.rank;
  s.lora_dropout = config.lora.enabled() && config.lora.dropout > 0.0;
  s.lora_rows = config.lora.enabled() && (config.lora.targets_layer(lora_target_name(kLoraQ)) ||
                                          config.lora.targets_layer(lora_target_name(kLoraK)) ||
                                          config.lora.targets_layer(lora_target_name(kLoraV)));
  s.mlp = widths.mlp;
  s.qk_norm_heads = config.qk_norm ? config.n_head + config.kv_heads() : 0;
  s.rms_norm = config.rms_norm();
  return s;
}

int64_t ActBuffer::bytes() const {
  return (elements * static_cast<int64_t>(dtype_size(dtype)) + 63) / 64 * 64;
}

int64_t act_list_bytes(const std::vector<ActBuffer>& list) {
  int64_t sum = 0;
  for (const ActBuffer& b : list) sum += b.total_bytes();
  return sum;
}

const char* act_name(ActId id) {
  switch (id) {
    case ActId::kResidual:
      return "residual";
    case ActId::kLn1:
      return "block.ln1";
    case ActId::kLn1Mean:
      return "block.ln1_mean";
    case ActId::kLn1Rstd:
      return "block.ln1_rstd";
    case ActId::kQkv:
      return "block.qkv";
    case ActId::kAtty:
      return "block.atty";
    case ActId::kLse:
      return "block.lse";
    case ActId::kRes2:
      return "block.res2";
    case ActId::kLn2:
      return "block.ln2";
    case ActId::kLn2Mean:
      return "block.ln2_mean";
    case ActId::kLn2Rstd:
      return "block.ln2_rstd";
    case ActId::kFch:
      return "block.fch";
    case ActId::kFchGelu:
      return "block.fch_gelu";
    case ActId::kLnf:
      return "head.lnf";
    case ActId::kLnfMean:
      return "head.lnf_mean";
    case ActId::kLnfRstd:
      return "head.lnf_rstd";
    case ActId::kLogits:
      return "head.logits";
    case ActId::kLosses:
      return "head.losses";
    case ActId::kDRes:
      return "scratch.d_res";
    case ActId::kDA:
      return "scratch.d_a";
    case ActId::kDB:
      return "scratch.d_b";
    case ActId::kDWideA:
      return "scratch.d_wide_a";
    case ActId::kDWideB:
      return "scratch.d_wide_b";
    case ActId::kDQkv:
      return "scratch.d_qkv";
    case ActId::kTmpProj:
      return "scratch.tmp_proj";
    case ActId::kLoraU:
      return "scratch.lora_u";
    case ActId::kLoraDu:
      return "scratch.lora_du";
    case ActId::kLoraX:
      return "scratch.lora_x";
    case ActId::kLoraRowsB:
      return "scratch.lora_rows_b";
    case ActId::kFchGate:
      return "block.fch_gate";
    case ActId::kQkRstd:
      return "block.qk_rstd";
  }
  return "?";
}

namespace {

ActBuffer make(ActId id, ActScope scope, int64_t elements, DType dtype) {
  ActBuffer b;
  b.id = id;
  b.name = act_name(id);
  b.scope = scope;
  b.elements = elements;
  b.dtype = dtype;
  return b;
}

}  // namespace

std::vector<ActBuffer> saved_activations(const ActivationSpec& s) {
  const int64_t N = s.batch * s.seq, C = s.n_embd, F = s.ffn, L = s.n_layer;
  std::vector<ActBuffer> out;
  ActBuffer res = make(ActId::kResidual, ActScope::kResidual, N * C, s.dtype);
  res.count = L + 1;
  out.push_back(res);
  // A block's buffers are its own from the lowest trained block up, unless recomputed: block
  // recomputes everything, mlp the MLP's hidden pair (from one shared copy each).
  const int64_t lowest = std::clamp<int64_t>(s.untrained_blocks, 0, L);
  const int64_t attn_kept = s.recompute == Recompute::kBlock ? L : lowest;
  const int64_t mlp_kept = s.recompute == Recompute::kNone ? lowest : L;
  auto block = [&](ActId id, int64_t elements, int64_t first_kept) {
    if (s.rms_norm && (id == ActId::kLn1Mean || id == ActId::kLn2Mean)) return;  // no mean
    ActBuffer b = make(id, ActScope::kBlock, elements, s.dtype);
    b.first_kept = first_kept;
    b.shared = first_kept > 0;
    b.count = (L - first_kept) + (b.shared ? 1 : 0);
    out.push_back(b);
  };
  block(ActId::kLn1, N * C, attn_kept);
  block(ActId::kLn1Mean, N, attn_kept);
  block(ActId::kLn1Rstd, N, attn_kept);
  block(ActId::kQkv, N * s.qkv, attn_kept);
  block(ActId::kAtty, N * C, attn_kept);
  block(ActId::kLse, s.batch * s.n_head * s.seq, attn_kept);
  block(ActId::kRes2, N * C, attn_kept);
  block(ActId::kLn2, N * C, attn_kept);
  block(ActId::kLn2Mean, N, attn_kept);
  block(ActId::kLn2Rstd, N, attn_kept);
  block(ActId::kFch, N * F, mlp_kept);
  block(ActId::kFchGelu, N * F, mlp_kept);
  if (s.mlp == MlpKind::kSwiglu) block(ActId::kFchGate, N * F, mlp_kept);
  if (s.qk_norm_heads > 0) block(ActId::kQkRstd, N * s.qk_norm_heads, attn_kept);
  out.push_back(make(ActId::kLnf, ActScope::kGlobal, N * C, s.dtype));
  if (!s.rms_norm) out.push_back(make(ActId::kLnfMean, ActScope::kGlobal, N, s.dtype));
  out.push_back(make(ActId::kLnfRstd, ActScope::kGlobal, N, s.dtype));
  out.push_back(make(ActId::kLogits, ActScope::kGlobal, N * s.padded_vocab, s.dtype));
  out.push_back(make(ActId::kLosses, ActScope::kGlobal, N, s.dtype));
  return out;
}

std::vector<ActBuffer> model_scratch(const ActivationSpec& s) {
  const int64_t N = s.batch * s.seq, C = s.n_embd, F = s.ffn;
  std::vector<ActBuffer> out;
  auto add = [&](ActId id, int64_t elements) {
    out.push_back(make(id, ActScope::kGlobal, elements, s.dtype));
  };
  add(ActId::kDRes, N * C);
  add(ActId::kDA, N * C);
  add(ActId::kDB, N * C);
  add(ActId::kDWideA, N * F);
  add(ActId::kDWideB, N * F);
  add(ActId::kDQkv, N * s.qkv);
  add(ActId::kTmpProj, N * C);
  if (s.lora_rank > 0) {
    // An adapter's down-projection and its gradient [N, rank]; with input dropout, the dropped
    // input of the widest adapted layer ([N, C] or the MLP projection's [N, F]).
    add(ActId::kLoraU, N * s.lora_rank);
    add(ActId::kLoraDu, N * s.lora_rank);
    if (s.lora_dropout) add(ActId::kLoraX, N * std::max(C, F));
    if (s.lora_rows) add(ActId::kLoraRowsB, s.qkv * s.lora_rank);
  }
  return out;
}

}  // namespace ledgerlm
