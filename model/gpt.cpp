// GPT-2 forward and backward over flat parameter/gradient buffers (see gpt.h).
//
// Activation plan. Per layer l the forward keeps (shapes with N = B*T):
//   res[l]  (N, C)  residual stream entering block l (res[L] leaves the last block)
//   ln1 (N, C), ln1_mean/rstd (N), qkv (N, 3C), atty (N, C), lse (B, H, T)
//   res2 (N, C)  residual after attention, ln2 (N, C), ln2_mean/rstd (N)
//   fch (N, 4C), fch_gelu (N, 4C)
// recompute=mlp keeps one shared fch/fch_gelu and recomputes them per layer in backward;
// recompute=block keeps only res[l] and recomputes the whole block (into one shared set of
// buffers) during backward. Dropout masks are pure functions of (seed, step, layer, site,
// global-batch sequence, element), so recomputed forwards are bit-identical to the original and
// any split of the global batch draws the same masks.
//
// Parameters are reached by (unit, offset inside the unit), resolved from the table once at
// construction; each unit's base comes from the UnitAccess between its acquire and release.
#include "model/gpt.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "model/base/check.h"
#include "model/base/rng.h"
#include "model/param_refs.h"

namespace ledgerlm {
namespace {

struct LayerActs {
  Tensor ln1, ln1_mean, ln1_rstd, qkv, atty, lse, res2, ln2, ln2_mean, ln2_rstd, fch, fch_gelu;
};

struct LayerParams {
  Tensor ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcprojw, fcprojb;
};

LayerParams layer_views(const Tensor& unit, const BlockOffsets& o) {
  return {unit.offset(o.ln1w), unit.offset(o.ln1b),    unit.offset(o.qkvw),
          unit.offset(o.qkvb), unit.offset(o.projw),   unit.offset(o.projb),
          unit.offset(o.ln2w), unit.offset(o.ln2b),    unit.offset(o.fcw),
          unit.offset(o.fcb),  unit.offset(o.fcprojw), unit.offset(o.fcprojb)};
}

// Dropout sites: each (call, layer, position) gets its own mask stream.
enum DropSite : uint64_t { kSiteEmbed = 0, kSiteAttnProb = 1, kSiteAttnOut = 2, kSiteMlpOut = 3 };

}  // namespace

struct GptModel::Impl {
  Backend& be;
  const ModelConfig& cfg;
  const ParamTable& table;
  DType pdt, gdt, adt;
  Recompute recompute = Recompute::kNone;
  bool bf16_matmul = false;  // precision.matmul = bf16 (see GptModel::set_bf16_matmul)
  bool tf32_matmul = false;  // precision.matmul = tf32 (GemmArgs::tf32)
  int64_t B = 0, T = 0;
  ModelRefs refs;

  Buffer arena;             // activations kept for backward
  Buffer scratch;           // workspace: activation gradients and temporaries
  std::vector<Tensor> res;  // L + 1
  std::vector<LayerActs> acts;
  Tensor lnf, lnf_mean, lnf_rstd, logits, losses;
  Tensor d_res, d_a, d_b, d_wide_a, d_wide_b, d_qkv, tmp_proj;
  int64_t arena_bytes = 0, scratch_bytes = 0;

  // Token ids and targets of the micro-batch in backend memory ([B*T] int32 each), uploaded by
  // the host-array forward; the state of the last forward.
  Buffer batch_ids;
  Tensor tokens, targets;
  bool have_targets = false;
  ForwardOptions fwd_opts;

  Impl(Backend& b, const ModelConfig& c, const ParamTable& t, DType p, DType g, DType a)
      : be(b), cfg(c), table(t), pdt(p), gdt(g), adt(a), refs(model_refs_build(t, c.n_layer)) {
    recompute = recompute_parse(cfg.recompute);
  }

  // Typed views of a unit's base (UnitAccess hands out untyped element offsets).
  Tensor param_unit(UnitAccess& u, int unit) const {
    Tensor t = u.params(unit);
    LLM_ASSERT(t.dtype == pdt, "unit ", unit, " parameters have dtype ", dtype_name(t.dtype),
               ", the model expects ", dtype_name(pdt));
    return t;
  }
  Tensor grad_unit(UnitAccess& u, int unit) const {
    Tensor t = u.grads(unit);
    LLM_ASSERT(t.dtype == gdt, "unit ", unit, " gradients have dtype ", dtype_name(t.dtype),
               ", the model expects ", dtype_name(gdt));
    return t;
  }

  // Carves named views from one allocation; first pass measures, second assigns.
  struct Carver {
    char* base = nullptr;
    int64_t used = 0;
    DType dt;
    Tensor take(int64_t elements) {
      Tensor t(base ? base + used : nullptr, dt);
      used += (elements * static_cast<int64_t>(dtype_size(dt)) + 63) / 64 * 64;
      return t;
    }
  };

  void layout(Carver& a, Carver& s) {
    const int64_t N = B * T, C = cfg.n_embd, L = cfg.n_layer, H = cfg.n_head;
    const int64_t Vp = cfg.padded_vocab();
    res.assign(L + 1, Tensor());
    acts.assign(L, LayerActs());
    for (int64_t l = 0; l <= L; ++l) res[l] = a.take(N * C);
    // Buffers that are per layer, or one shared copy when recomputed.
    auto keep_block = recompute != Recompute::kBlock;
    auto keep_mlp = recompute == Recompute::kNone;
    LayerActs shared;
    for (int64_t l = 0; l < L; ++l) {
      LayerActs& x = acts[l];
      bool first = l == 0;
      auto pick = [&](bool keep, Tensor& dst, Tensor& sh, int64_t n) {
        if (keep) {
          dst = a.take(n);
        } else {
          if (first) sh = a.take(n);
          dst = sh;
        }
      };
      pick(keep_block, x.ln1, shared.ln1, N * C);
      pick(keep_block, x.ln1_mean, shared.ln1_mean, N);
      pick(keep_block, x.ln1_rstd, shared.ln1_rstd, N);
      pick(keep_block, x.qkv, shared.qkv, N * 3 * C);
      pick(keep_block, x.atty, shared.atty, N * C);
      pick(keep_block, x.lse, shared.lse, B * H * T);
      pick(keep_block, x.res2, shared.res2, N * C);
      pick(keep_block, x.ln2, shared.ln2, N * C);
      pick(keep_block, x.ln2_mean, shared.ln2_mean, N);
      pick(keep_block, x.ln2_rstd, shared.ln2_rstd, N);
      pick(keep_mlp && keep_block, x.fch, shared.fch, N * 4 * C);
      pick(keep_mlp && keep_block, x.fch_gelu, shared.fch_gelu, N * 4 * C);
    }
    lnf = a.take(N * C);
    lnf_mean = a.take(N);
    lnf_rstd = a.take(N);
    logits = a.take(N * Vp);
    losses = a.take(N);
    d_res = s.take(N * C);
    d_a = s.take(N * C);
    d_b = s.take(N * C);
    d_wide_a = s.take(N * 4 * C);
    d_wide_b = s.take(N * 4 * C);
    d_qkv = s.take(N * 3 * C);
    tmp_proj = s.take(N * C);
  }

  void plan(int64_t batch, int64_t seq) {
    if (batch == B && seq == T && !arena.empty()) return;
    LLM_REQUIRE(seq <= cfg.block_size, "sequence length ", seq, " exceeds model.block_size ",
                cfg.block_size);
    B = batch;
    T = seq;
    arena.reset();
    scratch.reset();
    Carver a{nullptr, 0, adt}, s{nullptr, 0, adt};
    layout(a, s);
    arena_bytes = a.used;
    scratch_bytes = s.used;
    arena = be.allocate(MemTag::kActivations, static_cast<size_t>(arena_bytes));
    scratch = be.allocate(MemTag::kWorkspace, static_cast<size_t>(scratch_bytes));
    batch_ids.reset();
    batch_ids = be.allocate(MemTag::kData, static_cast<size_t>(gpt_batch_ids_bytes(B, T)));
    Carver a2{arena.as<char>(), 0, adt}, s2{scratch.as<char>(), 0, adt};
    layout(a2, s2);
  }

  AttentionArgs attn_args(int64_t l) const {
    AttentionArgs args;
    args.batch = B;
    args.seq = T;
    args.channels = cfg.n_embd;
    args.heads = cfg.n_head;
    args.dropout = fwd_opts.training ? cfg.dropout : 0.0;
    args.seed = fwd_opts.seed;
    args.site = site(l, kSiteAttnProb);
    args.first_sequence = fwd_opts.first_sequence;
    return args;
  }

  // One site per (step, layer, place): sequences are told apart by DropoutKey's sequence index.
  uint64_t site(int64_t layer, DropSite which) const {
    return (fwd_opts.step * 1024 + static_cast<uint64_t>(layer + 1)) * 4 + which;
  }

  // The key of an elementwise dropout on a [B*T, C] activation.
  DropoutKey drop_key(int64_t layer, DropSite which) const {
    return DropoutKey{fwd_opts.seed, site(layer, which), fwd_opts.first_sequence, T * cfg.n_embd};
  }

  bool dropout_on() const { return fwd_opts.training && cfg.dropout > 0.0; }

  void linear(Tensor out, Tensor in, Tensor w, Tensor bias, int64_t rows, int64_t in_f,
              int64_t out_f) {
    GemmArgs g;
    g.a = in;
    g.b = w;
    g.c = out;
    g.bias = bias;
    g.m = rows;
    g.n = out_f;
    g.k = in_f;
    g.trans_b = true;
    g.bf16_inputs = bf16_matmul;
    g.tf32 = tf32_matmul;
    be.gemm(g);
  }

  // dinp = dout @ W (written); dW += dout^T @ inp; dbias += colsum(dout).
  void linear_backward(Tensor dinp, Tensor dw, Tensor dbias, Tensor dout, Tensor inp, Tensor w,
                       int64_t rows, int64_t in_f, int64_t out_f) {
    GemmArgs gw;
    gw.a = dout;
    gw.b = inp;
    gw.c = dw;
    gw.m = out_f;
    gw.n = in_f;
    gw.k = rows;
    gw.trans_a = true;
    gw.accumulate = true;
    gw.bf16_inputs = bf16_matmul;
    gw.tf32 = tf32_matmul;
    be.gemm(gw);
    if (!dbias.empty()) be.bias_backward(dbias, dout, rows, out_f);
    if (!dinp.empty()) {
      GemmArgs gi;
      gi.a = dout;
      gi.b = w;
      gi.c = dinp;
      gi.m = rows;
      gi.n = in_f;
      gi.k = out_f;
      gi.bf16_inputs = bf16_matmul;
      gi.tf32 = tf32_matmul;
      be.gemm(gi);
    }
  }

  void mlp_hidden(const LayerActs& x, const LayerParams& p) {
    const int64_t N = B * T, C = cfg.n_embd;
    linear(x.fch, x.ln2, p.fcw, p.fcb, N, C, 4 * C);
    be.gelu_forward(x.fch_gelu, x.fch, N * 4 * C);
  }

  // Block l's forward; the caller has acquired its unit (forward or recompute).
  void block_forward(UnitAccess& units, int64_t l) {
    const int64_t N = B * T, C = cfg.n_embd;
    const LayerActs& x = acts[l];
    LayerParams p = layer_views(param_unit(units, refs.block_unit[l]), refs.blocks[l]);
    be.layernorm_forward(x.ln1, x.ln1_mean, x.ln1_rstd, res[l], p.ln1w, p.ln1b, N, C);
    linear(x.qkv, x.ln1, p.qkvw, p.qkvb, N, C, 3 * C);
    be.attention_forward(x.atty, x.lse, x.qkv, attn_args(l));
    linear(tmp_proj, x.atty, p.projw, p.projb, N, C, C);
    if (dropout_on()) be.dropout(tmp_proj, N * C, cfg.dropout, drop_key(l, kSiteAttnOut));
    be.add_layernorm_forward(x.res2, x.ln2, x.ln2_mean, x.ln2_rstd, res[l], tmp_proj, p.ln2w,
                             p.ln2b, N, C);
    mlp_hidden(x, p);
    linear(tmp_proj, x.fch_gelu, p.fcprojw, p.fcprojb, N, 4 * C, C);
    if (dropout_on()) be.dropout(tmp_proj, N * C, cfg.dropout, drop_key(l, kSiteMlpOut));
    be.add(res[l + 1], x.res2, tmp_proj, N * C);
  }

  // Host token arrays: checked, then uploaded into the micro-batch's id buffer.
  double forward_host(UnitAccess& units, const int32_t* tok, const int32_t* tgt, int64_t batch,
                      int64_t seq, const ForwardOptions& opts) {
    plan(batch, seq);
    const int64_t N = B * T, V = cfg.vocab_size;
    for (int64_t i = 0; i < N; ++i)
      LLM_REQUIRE(tok[i] >= 0 && tok[i] < V, "token id ", tok[i], " out of range [0, ", V, ")");
    Tensor ids(batch_ids.data(), DType::kI32);
    be.copy_from_host(ids, tok, N);
    Tensor tgt_ids;
    if (tgt != nullptr) {
      for (int64_t i = 0; i < N; ++i)
        LLM_REQUIRE(tgt[i] >= 0 && tgt[i] < V, "target id ", tgt[i], " out of range");
      tgt_ids = ids.offset(gpt_batch_ids_bytes(B, T) / 2 / sizeof(int32_t));  // second half
      be.copy_from_host(tgt_ids, tgt, N);
    }
    return forward(units, ids, tgt_ids, batch, seq, opts);
  }

  double forward(UnitAccess& units, Tensor tok, Tensor tgt, int64_t batch, int64_t seq,
                 const ForwardOptions& opts) {
    plan(batch, seq);
    fwd_opts = opts;
    const int64_t N = B * T, C = cfg.n_embd, V = cfg.vocab_size, Vp = cfg.padded_vocab();
    tokens = tok;
    const int E = refs.embed_unit, F = refs.final_unit;
    units.acquire(E, UnitPhase::kForward);
    Tensor embed = param_unit(units, E);
    be.embedding_forward(res[0], tokens, embed.offset(refs.wte), embed.offset(refs.wpe), B, T, C);
    units.release(E, UnitPhase::kForward);
    if (dropout_on()) be.dropout(res[0], N * C, cfg.dropout, drop_key(-1, kSiteEmbed));
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      units.acquire(refs.block_unit[l], UnitPhase::kForward);
      block_forward(units, l);
      units.release(refs.block_unit[l], UnitPhase::kForward);
    }
    units.acquire(F, UnitPhase::kForward);
    Tensor fin = param_unit(units, F);
    be.layernorm_forward(lnf, lnf_mean, lnf_rstd, res[cfg.n_layer], fin.offset(refs.lnfw),
                         fin.offset(refs.lnfb), N, C);
    units.release(F, UnitPhase::kForward);
    units.acquire(E, UnitPhase::kForward);  // the tied head
    linear(logits, lnf, param_unit(units, E).offset(refs.wte), Tensor(), N, C, Vp);
    units.release(E, UnitPhase::kForward);
    have_targets = !tgt.empty();
    if (!have_targets) return 0.0;
    targets = tgt;
    be.softmax_cross_entropy(losses, logits, targets, N, V, Vp, 0.0);
    return be.sum(losses, N) / static_cast<double>(N);  // one scalar comes back
  }

  // Block l's backward from d_res (the gradient of the block's output), leaving the gradient of
  // its input in d_res; the caller has acquired its unit for backward.
  void block_backward(UnitAccess& units, int64_t l) {
    const int64_t N = B * T, C = cfg.n_embd;
    const LayerActs& x = acts[l];
    LayerParams p = layer_views(param_unit(units, refs.block_unit[l]), refs.blocks[l]);
    LayerParams g = layer_views(grad_unit(units, refs.block_unit[l]), refs.blocks[l]);
    // MLP: res[l+1] = res2 + drop(proj(gelu(fc(ln2(res2)))))
    Tensor dy = d_res;
    if (dropout_on()) {
      be.convert(d_a, d_res, N * C);
      be.dropout(d_a, N * C, cfg.dropout, drop_key(l, kSiteMlpOut));
      dy = d_a;
    }
    if (recompute == Recompute::kMlp) mlp_hidden(x, p);
    linear_backward(d_wide_a, g.fcprojw, g.fcprojb, dy, x.fch_gelu, p.fcprojw, N, 4 * C, C);
    be.gelu_bias_backward(d_wide_b, g.fcb, x.fch, d_wide_a, N, 4 * C);
    linear_backward(d_b, g.fcw, Tensor(), d_wide_b, x.ln2, p.fcw, N, C, 4 * C);
    be.layernorm_backward(d_res, g.ln2w, g.ln2b, d_b, x.res2, p.ln2w, x.ln2_mean, x.ln2_rstd, N, C);
    // Attention: res2 = res[l] + drop(proj(attn(qkv(ln1(res[l])))))
    dy = d_res;
    if (dropout_on()) {
      be.convert(d_a, d_res, N * C);
      be.dropout(d_a, N * C, cfg.dropout, drop_key(l, kSiteAttnOut));
      dy = d_a;
    }
    linear_backward(d_b, g.projw, g.projb, dy, x.atty, p.projw, N, C, C);
    be.attention_backward(d_qkv, d_b, x.qkv, x.atty, x.lse, attn_args(l));
    linear_backward(d_a, g.qkvw, g.qkvb, d_qkv, x.ln1, p.qkvw, N, C, 3 * C);
    be.layernorm_backward(d_res, g.ln1w, g.ln1b, d_a, res[l], p.ln1w, x.ln1_mean, x.ln1_rstd, N, C);
  }

  void backward(UnitAccess& units, double loss_scale) {
    LLM_ASSERT(have_targets, "backward needs a forward with targets");
    const int64_t N = B * T, C = cfg.n_embd, L = cfg.n_layer, V = cfg.vocab_size;
    const int64_t Vp = cfg.padded_vocab();
    const int E = refs.embed_unit, F = refs.final_unit;
    // dlogits in place of the logits (the forward kept them intact).
    be.softmax_cross_entropy(losses, logits, targets, N, V, Vp,
                             loss_scale / static_cast<double>(N));
    have_targets = false;  // logits are now gradients: a second backward would be wrong
    units.acquire(E, UnitPhase::kBackward);
    linear_backward(d_a, grad_unit(units, E).offset(refs.wte), Tensor(), logits, lnf,
                    param_unit(units, E).offset(refs.wte), N, C, Vp);
    units.release(E, UnitPhase::kBackward);
    units.acquire(F, UnitPhase::kBackward);
    Tensor fin = param_unit(units, F), dfin = grad_unit(units, F);
    be.zero(d_res, N * C);
    be.layernorm_backward(d_res, dfin.offset(refs.lnfw), dfin.offset(refs.lnfb), d_a, res[L],
                          fin.offset(refs.lnfw), lnf_mean, lnf_rstd, N, C);
    units.release(F, UnitPhase::kBackward);
    units.grads_done(F);
    for (int64_t l = L - 1; l >= 0; --l) {
      const int u = refs.block_unit[l];
      if (recompute == Recompute::kBlock) {
        units.acquire(u, UnitPhase::kRecompute);
        block_forward(units, l);
        units.release(u, UnitPhase::kRecompute);
      }
      units.acquire(u, UnitPhase::kBackward);
      block_backward(units, l);
      units.release(u, UnitPhase::kBackward);
      units.grads_done(u);
    }
    if (dropout_on()) be.dropout(d_res, N * C, cfg.dropout, drop_key(-1, kSiteEmbed));
    units.acquire(E, UnitPhase::kBackward);
    Tensor dembed = grad_unit(units, E);
    be.embedding_backward(dembed.offset(refs.wte), dembed.offset(refs.wpe), d_res, tokens, B, T, C);
    units.release(E, UnitPhase::kBackward);
    units.grads_done(E);
  }
};

GptModel::GptModel(const ModelConfig& config, const ParamTable& table, Backend& backend,
                   DType param_dtype, DType grad_dtype, DType act_dtype)
    : config_(config), table_(table) {
  config_.validate();
  LLM_REQUIRE(act_dtype == DType::kF32 || act_dtype == DType::kF64,
              "activations must be fp32 or fp64");
  impl_ = std::make_unique<Impl>(backend, config_, table_, param_dtype, grad_dtype, act_dtype);
}

GptModel::~GptModel() = default;

void GptModel::set_bf16_matmul(bool on) {
  impl_->bf16_matmul = on;
}
void GptModel::set_tf32_matmul(bool on) {
  impl_->tf32_matmul = on;
}

void GptModel::plan(int64_t batch, int64_t seq) {
  impl_->plan(batch, seq);
}
int64_t GptModel::activation_bytes() const {
  return impl_->arena_bytes;
}
int64_t GptModel::workspace_bytes() const {
  return impl_->scratch_bytes;
}

double GptModel::forward(UnitAccess& units, const int32_t* tokens, const int32_t* targets,
                         int64_t batch, int64_t seq, const ForwardOptions& options) {
  return impl_->forward_host(units, tokens, targets, batch, seq, options);
}

double GptModel::forward(UnitAccess& units, Tensor tokens, Tensor targets, int64_t batch,
                         int64_t seq, const ForwardOptions& options) {
  return impl_->forward(units, tokens, targets, batch, seq, options);
}

int64_t gpt_batch_ids_bytes(int64_t batch, int64_t seq) {
  return 2 * ((batch * seq * 4 + 63) / 64 * 64);  // tokens, then targets, 64-byte aligned each
}

void GptModel::backward(UnitAccess& units, double loss_scale) {
  impl_->backward(units, loss_scale);
}

double GptModel::forward(Tensor params, const int32_t* tokens, const int32_t* targets,
                         int64_t batch, int64_t seq, const ForwardOptions& options) {
  LLM_ASSERT(params.dtype == impl_->pdt, "parameter dtype mismatch");
  FlatUnits units(table_, params);
  return impl_->forward_host(units, tokens, targets, batch, seq, options);
}

void GptModel::backward(Tensor params, Tensor grads, double loss_scale) {
  LLM_ASSERT(grads.dtype == impl_->gdt, "gradient dtype mismatch");
  FlatUnits units(table_, params, grads);
  impl_->backward(units, loss_scale);
}

Tensor GptModel::token_losses() const {
  return impl_->losses;
}
double GptModel::token_loss_sum(int64_t count) const {
  return impl_->be.sum(impl_->losses, count);
}
Tensor GptModel::logits() const {
  return impl_->logits;
}

void gpt_init_tensor(const ParamTable& table, int param, uint64_t seed, float* out) {
  const ParamInfo& p = table.params[static_cast<size_t>(param)];
  const int64_t rows_real = p.kind == ParamKind::kEmbedding ? p.hf_rows : p.shape[0];
  const int64_t cols = p.numel / p.shape[0];
  for (int64_t i = 0; i < p.numel; ++i) {
    switch (p.init) {
      case InitKind::kOnes:
        out[i] = 1.0f;
        break;
      case InitKind::kZeros:
        out[i] = 0.0f;
        break;
      case InitKind::kNormal: {
        if (i / cols >= rows_real) {  // vocab padding rows stay zero
          out[i] = 0.0f;
          break;
        }
        auto bits = rng_bits(seed, RngStream::kInit, static_cast<uint64_t>(param),
                             static_cast<uint64_t>(i));
        out[i] = static_cast<float>(p.init_std * rng_normal(bits[0], bits[1]));
        break;
      }
    }
  }
}

void gpt_init_params(const ParamTable& table, Tensor params, uint64_t seed, Backend& backend) {
  std::vector<float> values;
  backend.zero(params, table.total);
  int64_t largest = 0;
  for (const ParamInfo& p : table.params) largest = std::max(largest, p.numel);
  // Generated on the host, uploaded as fp32, converted to the buffer's dtype by the backend.
  Buffer staging = backend.allocate(MemTag::kWorkspace, static_cast<size_t>(largest) * 4);
  const Tensor f32(staging.data(), DType::kF32);
  for (size_t pi = 0; pi < table.params.size(); ++pi) {
    const ParamInfo& p = table.params[pi];
    values.assign(static_cast<size_t>(p.numel), 0.0f);
    gpt_init_tensor(table, static_cast<int>(pi), seed, values.data());
    backend.copy_from_host(f32, values.data(), p.numel);
    backend.convert(params.offset(p.offset), f32, p.numel);
  }
}

}  // namespace ledgerlm
