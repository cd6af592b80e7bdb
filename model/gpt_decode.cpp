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

}  // namespace

GptDecoder::GptDecoder(const ModelConfig& config, const ParamTable& table, Backend& backend,
                       Tensor params)
    : cfg_(config), be_(backend), params_(params) {
  LLM_REQUIRE(params.dtype == DType::kF32, "decoder: fp32 weights expected");
  const ModelRefs refs = model_refs_build(table, config.n_layer);
  const int64_t embed = table.units[refs.embed_unit].offset;
  const int64_t fin = table.units[refs.final_unit].offset;
  wte_ = embed + refs.wte;
  wpe_ = embed + refs.wpe;
  lnfw_ = fin + refs.lnfw;
  lnfb_ = fin + refs.lnfb;
  for (size_t l = 0; l < refs.blocks.size(); ++l)
    blocks_.push_back(block_offsets_shift(refs.blocks[l], table.units[refs.block_unit[l]].offset));
  const int64_t C = cfg_.n_embd, L = cfg_.n_layer, T = cfg_.block_size, Vp = cfg_.padded_vocab();
  cache_ = be_.allocate(MemTag::kActivations, static_cast<size_t>(2 * L * T * C) * 4);
  k_ = Tensor(cache_.data(), DType::kF32);
  v_ = k_.offset(L * T * C);
  // x, ln, att, proj: C each; qkv: 3C; fc, gelu: 4C each; logits: Vp; mean, rstd: 1 each.
  const int64_t sizes[] = {C, C, 3 * C, C, C, 4 * C, 4 * C, Vp, 1, 1};
  Tensor* views[] = {&x_, &ln_, &qkv_, &att_, &proj_, &fch_, &fcg_, &logits_, &mean_, &rstd_};
  int64_t total = 0;
  for (int64_t n : sizes) total += (n + 15) / 16 * 16;  // each view 64-byte aligned
  work_ = be_.allocate(MemTag::kWorkspace, static_cast<size_t>(total) * 4);
  int64_t at = 0;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    *views[i] = Tensor(work_.data(), DType::kF32).offset(at);
    at += (sizes[i] + 15) / 16 * 16;
  }
  host_logits_.assign(static_cast<size_t>(Vp), 0.0f);
}

void GptDecoder::reset() {
  length_ = 0;
}

const float* GptDecoder::step(int32_t token) {
  const int64_t C = cfg_.n_embd, H = cfg_.n_head, T = cfg_.block_size, Vp = cfg_.padded_vocab();
  LLM_REQUIRE(length_ < T, "decoder: context full (", T, " tokens)");
  LLM_REQUIRE(token >= 0 && token < cfg_.vocab_size, "token id ", token, " out of range");
  const int64_t pos = length_;
  be_.add(x_, p(wte_ + token * C), p(wpe_ + pos * C), C);
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    const BlockOffsets& b = blocks_[static_cast<size_t>(l)];
    be_.layernorm_forward(ln_, mean_, rstd_, x_, p(b.ln1w), p(b.ln1b), 1, C);
    linear1(be_, qkv_, ln_, p(b.qkvw), p(b.qkvb), C, 3 * C);
    const Tensor kc = k_.offset(l * T * C), vc = v_.offset(l * T * C);
    be_.copy(kc.offset(pos * C), qkv_.offset(C), C);
    be_.copy(vc.offset(pos * C), qkv_.offset(2 * C), C);
    be_.attention_decode(att_, qkv_, kc, vc, pos + 1, H, C, C);
    linear1(be_, proj_, att_, p(b.projw), p(b.projb), C, C);
    be_.add(x_, x_, proj_, C);
    be_.layernorm_forward(ln_, mean_, rstd_, x_, p(b.ln2w), p(b.ln2b), 1, C);
    linear1(be_, fch_, ln_, p(b.fcw), p(b.fcb), C, 4 * C);
    be_.gelu_forward(fcg_, fch_, 4 * C);
    linear1(be_, proj_, fcg_, p(b.fcprojw), p(b.fcprojb), 4 * C, C);
    be_.add(x_, x_, proj_, C);
  }
  be_.layernorm_forward(ln_, mean_, rstd_, x_, p(lnfw_), p(lnfb_), 1, C);
  linear1(be_, logits_, ln_, p(wte_), Tensor(), C, Vp);
  be_.copy_to_host(host_logits_.data(), logits_, Vp);
  ++length_;
  return host_logits_.data();
}

}  // namespace ledgerlm
