// KV-cache decoding (see gpt_decode.h).
#include "model/gpt_decode.h"

#include <cmath>

#include "model/base/check.h"

namespace ledgerlm {

GptDecoder::GptDecoder(const ModelConfig& config, const ParamTable& table, Backend& backend,
                       const float* params)
    : cfg_(config), table_(table), be_(backend), params_(params) {
  const ModelRefs refs = model_refs_build(table, config.n_layer);
  const int64_t embed = table.units[refs.embed_unit].offset;
  const int64_t fin = table.units[refs.final_unit].offset;
  wte_ = embed + refs.wte;
  wpe_ = embed + refs.wpe;
  lnfw_ = fin + refs.lnfw;
  lnfb_ = fin + refs.lnfb;
  for (size_t l = 0; l < refs.blocks.size(); ++l)
    blocks_.push_back(block_offsets_shift(refs.blocks[l], table.units[refs.block_unit[l]].offset));
  const int64_t C = cfg_.n_embd, L = cfg_.n_layer, T = cfg_.block_size;
  k_cache_.assign(static_cast<size_t>(L * T * C), 0.0f);
  v_cache_.assign(k_cache_.size(), 0.0f);
  x_.assign(C, 0.0f);
  ln_.assign(C, 0.0f);
  qkv_.assign(3 * C, 0.0f);
  att_.assign(C, 0.0f);
  proj_.assign(C, 0.0f);
  fch_.assign(4 * C, 0.0f);
  fcg_.assign(4 * C, 0.0f);
  logits_.assign(cfg_.padded_vocab(), 0.0f);
  mean_.assign(1, 0.0f);
  rstd_.assign(1, 0.0f);
  scores_.assign(T, 0.0f);
}

void GptDecoder::reset() {
  length_ = 0;
}

Tensor GptDecoder::p(int64_t offset) const {
  return Tensor(const_cast<float*>(params_) + offset, DType::kF32);
}

namespace {

void linear1(Backend& be, float* out, float* in, Tensor w, Tensor b, int64_t in_f, int64_t out_f) {
  GemmArgs g;
  g.a = Tensor(in, DType::kF32);
  g.b = w;
  g.c = Tensor(out, DType::kF32);
  g.bias = b;
  g.m = 1;
  g.n = out_f;
  g.k = in_f;
  g.trans_b = true;
  be.gemm(g);
}

}  // namespace

const float* GptDecoder::step(int32_t token) {
  const int64_t C = cfg_.n_embd, H = cfg_.n_head, hd = C / H, T = cfg_.block_size;
  LLM_REQUIRE(length_ < T, "decoder: context full (", T, " tokens)");
  LLM_REQUIRE(token >= 0 && token < cfg_.vocab_size, "token id ", token, " out of range");
  const int64_t pos = length_;
  auto F = [](std::vector<float>& v) { return Tensor(v.data(), DType::kF32); };
  const float* wte = params_ + wte_;
  const float* wpe = params_ + wpe_;
  for (int64_t c = 0; c < C; ++c) x_[c] = wte[token * C + c] + wpe[pos * C + c];
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t l = 0; l < cfg_.n_layer; ++l) {
    const BlockOffsets& b = blocks_[static_cast<size_t>(l)];
    be_.layernorm_forward(F(ln_), F(mean_), F(rstd_), F(x_), p(b.ln1w), p(b.ln1b), 1, C);
    linear1(be_, qkv_.data(), ln_.data(), p(b.qkvw), p(b.qkvb), C, 3 * C);
    float* kc = k_cache_.data() + l * T * C;
    float* vc = v_cache_.data() + l * T * C;
    for (int64_t c = 0; c < C; ++c) {
      kc[pos * C + c] = qkv_[C + c];
      vc[pos * C + c] = qkv_[2 * C + c];
    }
    for (int64_t h = 0; h < H; ++h) {
      const float* q = qkv_.data() + h * hd;
      float maxv = -INFINITY;
      for (int64_t t = 0; t <= pos; ++t) {
        float s = 0.0f;
        for (int64_t d = 0; d < hd; ++d) s += q[d] * kc[t * C + h * hd + d];
        scores_[t] = s * scale;
        maxv = std::fmax(maxv, scores_[t]);
      }
      float sum = 0.0f;
      for (int64_t t = 0; t <= pos; ++t) {
        scores_[t] = std::exp(scores_[t] - maxv);
        sum += scores_[t];
      }
      for (int64_t d = 0; d < hd; ++d) att_[h * hd + d] = 0.0f;
      for (int64_t t = 0; t <= pos; ++t) {
        float w = scores_[t] / sum;
        for (int64_t d = 0; d < hd; ++d) att_[h * hd + d] += w * vc[t * C + h * hd + d];
      }
    }
    linear1(be_, proj_.data(), att_.data(), p(b.projw), p(b.projb), C, C);
    be_.add(F(x_), F(x_), F(proj_), C);
    be_.layernorm_forward(F(ln_), F(mean_), F(rstd_), F(x_), p(b.ln2w), p(b.ln2b), 1, C);
    linear1(be_, fch_.data(), ln_.data(), p(b.fcw), p(b.fcb), C, 4 * C);
    be_.gelu_forward(F(fcg_), F(fch_), 4 * C);
    linear1(be_, proj_.data(), fcg_.data(), p(b.fcprojw), p(b.fcprojb), 4 * C, C);
    be_.add(F(x_), F(x_), F(proj_), C);
  }
  be_.layernorm_forward(F(ln_), F(mean_), F(rstd_), F(x_), p(lnfw_), p(lnfb_), 1, C);
  linear1(be_, logits_.data(), ln_.data(), p(wte_), Tensor(), C, cfg_.padded_vocab());
  ++length_;
  return logits_.data();
}

}  // namespace ledgerlm
