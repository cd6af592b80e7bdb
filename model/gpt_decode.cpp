// KV-cache decoding (see gpt_decode.h).
#include "model/gpt_decode.h"

#include "model/base/check.h"

namespace ledgerlm {
namespace {

void linear1(Backend& be, Tensor out, Tensor in, Tensor w, Tensor b, int64_t in_f, int64_t out_f) {
  GemmArgs g;
  g.a = in;
  g.b = w;
  g.c = out;
  g.bias = b;
  g.m = 1;
  g.n = out_f;
  g.k = in_f;
  g.trans_b = true;
  be.gemm(g);
}

// What decoding gives the shared block: plain linear layers (adapters are merged before a LoRA
// run samples), this position's k and v appended to the layer's cache and one query row's
// attention over it, no dropout.
struct DecodeHooks final : BlockHooks {
  Backend& be;
  Tensor kc, vc;  // this layer's cache: [block_size, KV x head_dim] each
  int64_t pos = 0;
  const BlockWidths& w;
  DecodeHooks(Backend& b, Tensor k, Tensor v, int64_t p, const BlockWidths& widths)
      : be(b), kc(k), vc(v), pos(p), w(widths) {}
  void linear(int /*site*/, Tensor out, Tensor in, Tensor wt, Tensor bias, int64_t in_f,
              int64_t out_f) override {
    linear1(be, out, in, wt, bias, in_f, out_f);
  }
  void attention(const BlockActs& x) override {
    const int64_t C = w.C, kvw = w.KV * w.hd;
    be.copy(kc.offset(pos * kvw), x.qkv.offset(C), kvw);
    be.copy(vc.offset(pos * kvw), x.qkv.offset(C + kvw), kvw);
    if (w.KV == w.H) {
      be.attention_decode(x.atty, x.qkv, kc, vc, pos + 1, w.H, C, C);
      return;
    }
    // Grouped-query attention: each query head against its kv head's columns of the cache.
    const int64_t group = w.H / w.KV;
    for (int64_t h = 0; h < w.H; ++h) {
      const int64_t col = (h / group) * w.hd;
      be.attention_decode(x.atty.offset(h * w.hd), x.qkv.offset(h * w.hd), kc.offset(col),
                          vc.offset(col), pos + 1, 1, w.hd, kvw);
    }
  }
  Positions positions() const override { return {1, pos}; }  // one row at position pos
};

}  // namespace

GptDecoder::GptDecoder(const ModelConfig& config, const ParamTable& table, Backend& backend,
                       Tensor params)
    : cfg_(config), be_(backend), params_(params) {
  LLM_REQUIRE(params.dtype == DType::kF32, "decoder: fp32 weights expected");
  const ModelRefs refs = model_refs_build(table, config);
  widths_ = block_widths(block_recipe(config));
  const int64_t embed = table.units[refs.embed_unit].offset;
  const int64_t fin = table.units[refs.final_unit].offset;
  wte_ = embed + refs.wte;
  wpe_ = refs.wpe < 0 ? -1 : embed + refs.wpe;   // none with rotary positions
  lnfw_ = refs.lnfw < 0 ? -1 : fin + refs.lnfw;  // -1: the final norm has no such tensor
  lnfb_ = refs.lnfb < 0 ? -1 : fin + refs.lnfb;
  head_ = refs.lm_head >= 0 ? fin + refs.lm_head : wte_;
  for (size_t l = 0; l < refs.blocks.size(); ++l)
    blocks_.push_back(block_offsets_shift(refs.blocks[l], table.units[refs.block_unit[l]].offset));
  const int64_t C = cfg_.n_embd, L = cfg_.n_layer, T = cfg_.block_size, Vp = cfg_.padded_vocab();
  const int64_t F = widths_.F, KVW = widths_.KV * widths_.hd;  // KV heads: grouped-query
  cache_ = be_.allocate(MemTag::kActivations, static_cast<size_t>(2 * L * T * KVW) * 4);
  k_ = Tensor(cache_.data(), DType::kF32);
  v_ = k_.offset(L * T * KVW);
  // x, proj: C each; logits: Vp; the block's activations for one row: ln (C, both norms), mean
  // and rstd (1 each), qkv, attention output (C), res2 (C), fc and its activation (F each),
  // SwiGLU's gate (F; one element otherwise, unused) and the q and k heads' rstd (model.qk_norm:
  // H + KV).
  BlockActs& a = acts_;
  const int64_t gate = widths_.mlp == MlpKind::kSwiglu ? F : 1;
  const int64_t sizes[] = {
      C, C, Vp, C, 1, 1, widths_.qkv, C, C, F, F, gate, widths_.H + widths_.KV};
  Tensor* views[] = {&x_,     &proj_,  &logits_, &a.ln1,      &a.ln1_mean, &a.ln1_rstd, &a.qkv,
                     &a.atty, &a.res2, &a.fch,   &a.fch_gelu, &a.fch_gate, &a.qk_rstd};
  int64_t total = 0;
  for (int64_t n : sizes) total += (n + 15) / 16 * 16;  // each view 64-byte aligned
  work_ = be_.allocate(MemTag::kWorkspace, static_cast<size_t>(total) * 4);
  int64_t at = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    *views[i] = Tensor(work_.data(), DType::kF32).offset(at);
    at += (sizes[i] + 15) / 16 * 16;
  }
  // The two norms run one after the other: they share their output and statistics.
  a.ln2 = a.ln1;
  a.ln2_mean = a.ln1_mean;
  a.ln2_rstd = a.ln1_rstd;
  host_logits_.assign(static_cast<size_t>(Vp), 0.0f);
}

void GptDecoder::reset() {
  length_ = 0;
}

const float* GptDecoder::step(int32_t token) {
  const int64_t C = cfg_.n_embd, T = cfg_.block_size, Vp = cfg_.padded_vocab();
  const int64_t KVW = widths_.KV * widths_.hd;
  LLM_REQUIRE(length_ < T, "decoder: context full (", T, " tokens)");
  LLM_REQUIRE(token >= 0 && token < cfg_.vocab_size, "token id ", token, " out of range");
  const int64_t pos = length_;
  if (wpe_ < 0)  // rotary positions: the token's embedding alone
    be_.copy(x_, p(wte_ + token * C), C);
  else
    be_.add(x_, p(wte_ + token * C), p(wpe_ + pos * C), C);
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    const BlockOffsets& b = blocks_[static_cast<size_t>(l)];
    BlockTensors w;
    for (size_t k = 0; k < w.size(); ++k) w[k] = b[k] < 0 ? Tensor() : p(b[k]);  // -1: absent
    DecodeHooks hooks(be_, k_.offset(l * T * KVW), v_.offset(l * T * KVW), pos, widths_);
    gpt_block_forward(be_, hooks, w, acts_, x_, x_, proj_, 1, widths_);
  }
  // The final norm's output and statistics reuse the blocks' (their last use is over).
  block_norm_forward(be_, widths_, acts_.ln1, acts_.ln1_mean, acts_.ln1_rstd, x_,
                     lnfw_ < 0 ? Tensor() : p(lnfw_), lnfb_ < 0 ? Tensor() : p(lnfb_), 1);
  linear1(be_, logits_, acts_.ln1, p(head_), Tensor(), C, Vp);
  // model.logit_softcap: sampling sees the capped logits, as the loss does.
  if (cfg_.logit_softcap > 0.0) be_.softcap_forward(logits_, logits_, Vp, cfg_.logit_softcap);
  be_.copy_to_host(host_logits_.data(), logits_, Vp);
  ++length_;
  return host_logits_.data();
}

}  // namespace ledgerlm
