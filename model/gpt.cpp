// GPT-2 forward and backward over flat parameter/gradient buffers (see gpt.h).
//
// Activations. The forward keeps exactly the buffers of saved_activations()
// (model/activation_list.cpp, which lists their shapes): the residual stream res[0..L], per
// block its layernorm inputs and statistics, qkv, the attention output and log-sum-exp, the
// residual after attention and the MLP's hidden pair, and the head's. recompute=mlp keeps one
// shared MLP hidden pair and recomputes it per layer in backward; recompute=block keeps only
// res[l] and recomputes the whole block (into one shared set of buffers) during backward.
// Dropout masks are pure functions of (seed, step, layer, site, global-batch sequence, element),
// so recomputed forwards are bit-identical to the original and any split of the global batch
// draws the same masks.
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
#include "model/gpt_block.h"
#include "model/param_refs.h"

namespace ledgerlm {
namespace {

using LayerActs = BlockActs;

// The block's tensors: role k from `trained` or, when bit k of `frozen_mask` is set, from
// `frozen`. Gradient views pass an empty `frozen`: frozen tensors have no gradient (empty view).
// Roles the model does not have (offset -1) are empty views.
BlockTensors layer_views(const Tensor& trained, const Tensor& frozen, const BlockOffsets& at,
                         uint32_t frozen_mask) {
  BlockTensors v;
  for (int k = 0; k < kBlockRoles; ++k) {
    const bool is_frozen = (frozen_mask >> k) & 1u;
    const Tensor& base = is_frozen ? frozen : trained;
    const int64_t off = at[static_cast<size_t>(k)];  // -1: a role this model does not have
    v[static_cast<size_t>(k)] = base.empty() || off < 0 ? Tensor() : base.offset(off);
  }
  return v;
}

// A linear layer's adapter: factor views (empty when absent or, for gradients, frozen).
struct LoraViews {
  Tensor a, b;
  bool present() const { return !a.empty() || !b.empty(); }
};

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
  AttentionImpl attention_impl = AttentionImpl::kOwn;  // precision.attention resolved
  int64_t B = 0, T = 0;
  ModelRefs refs;
  BlockWidths widths;  // C, the qkv projection's and the MLP's widths (block_recipe.h)

  Buffer arena;             // activations kept for backward
  Buffer scratch;           // workspace: activation gradients and temporaries
  std::vector<Tensor> res;  // L + 1
  std::vector<LayerActs> acts;
  Tensor lnf, lnf_mean, lnf_rstd, logits, losses;
  Tensor d_res, d_a, d_b, d_wide_a, d_wide_b, d_qkv, tmp_proj;
  // Adapters (LoRA): u = s drop(x) A^T and its gradient [N, rank]; the dropped input or the
  // input gradient's adapter part [N, 4C] (only with lora.dropout > 0).
  Tensor lora_u, lora_du, lora_x;
  // q, k and v's own adapters: B placed in its rows of a zero (QKV, rank) matrix, and the
  // gradient of that matrix (only with lora.targets q, k or v).
  Tensor lora_rows_b;
  // Gradient sinks for frozen norm weights and biases whose kernels compute the weight gradient
  // together with the input gradient (two halves: a kernel's weight and bias never alias), and
  // for a frozen embedding next to a trained one. Written, never read.
  Buffer sink;
  Tensor sink_a, sink_b;
  int64_t arena_bytes = 0, scratch_bytes = 0;
  // Every buffer the last plan() carved, in order (arena, scratch).
  std::vector<CarvedBuffer> carved_saved, carved_scratch;

  // Token ids and targets of the micro-batch in backend memory ([B*T] int32 each), uploaded by
  // the host-array forward; the state of the last forward.
  Buffer batch_ids;
  Tensor tokens, targets;
  bool have_targets = false;
  ForwardOptions fwd_opts;

  Impl(Backend& b, const ModelConfig& c, const ParamTable& t, DType p, DType g, DType a)
      : be(b),
        cfg(c),
        table(t),
        pdt(p),
        gdt(g),
        adt(a),
        refs(model_refs_build(t, c)),
        widths(block_widths(block_recipe(c))) {
    recompute = recompute_parse(cfg.recompute);
  }

  // Typed views of a unit's base (UnitAccess hands out untyped element offsets).
  Tensor param_unit(UnitAccess& u, int unit) const {
    Tensor t = u.params(unit);
    LLM_ASSERT(t.dtype == pdt, "unit ", unit, " parameters have dtype ", dtype_name(t.dtype),
               ", the model expects ", dtype_name(pdt));
    return t;
  }
  Tensor frozen_unit(UnitAccess& u, int unit) const {
    if (!refs.any_frozen) return Tensor();
    Tensor t = u.frozen(unit);
    LLM_ASSERT(!t.empty() && t.dtype == pdt, "unit ", unit, ": frozen weights missing or of dtype ",
               dtype_name(t.dtype));
    return t;
  }
  BlockTensors block_params(UnitAccess& u, int64_t l) const {
    const int unit = refs.block_unit[l];
    return layer_views(param_unit(u, unit), frozen_unit(u, unit), refs.blocks[l],
                       refs.block_frozen[l]);
  }
  BlockTensors block_grads(UnitAccess& u, int64_t l) const {
    return layer_views(grad_unit(u, refs.block_unit[l]), Tensor(), refs.blocks[l],
                       refs.block_frozen[l]);
  }
  LoraViews lora_params(UnitAccess& u, int64_t l, int site) const {
    const LoraRef& r = refs.lora[l][site];
    if (!r.present()) return {};
    const int unit = refs.block_unit[l];
    const Tensor t = param_unit(u, unit), f = r.a_frozen || r.b_frozen ? frozen_unit(u, unit) : t;
    return {(r.a_frozen ? f : t).offset(r.a), (r.b_frozen ? f : t).offset(r.b)};
  }
  LoraViews lora_grads(UnitAccess& u, int64_t l, int site) const {
    const LoraRef& r = refs.lora[l][site];
    if (!r.present()) return {};
    const Tensor g = grad_unit(u, refs.block_unit[l]);
    return {r.a_frozen ? Tensor() : g.offset(r.a), r.b_frozen ? Tensor() : g.offset(r.b)};
  }
  // A frozen tensor's gradient goes to a sink when its kernel insists on writing one.
  Tensor or_sink(Tensor g, const Tensor& sink_half) const { return g.empty() ? sink_half : g; }
  Tensor grad_unit(UnitAccess& u, int unit) const {
    Tensor t = u.grads(unit);
    LLM_ASSERT(t.dtype == gdt, "unit ", unit, " gradients have dtype ", dtype_name(t.dtype),
               ", the model expects ", dtype_name(gdt));
    return t;
  }

  // Carves the listed buffers from one allocation; the first pass measures, the second assigns
  // (and records what it carved).
  struct Carver {
    char* base = nullptr;
    int64_t used = 0;
    std::vector<CarvedBuffer>* record = nullptr;
    Tensor take(const ActBuffer& b) {
      Tensor t(base ? base + used : nullptr, b.dtype);
      used += b.bytes();
      if (record != nullptr) record->push_back({b.name, b.bytes()});
      return t;
    }
  };

  // What decides the buffers: the micro-batch, the recompute mode, the blocks that get a
  // backward, and the adapters this table holds.
  ActivationSpec activation_spec_now() const {
    ActivationSpec s =
        activation_spec(cfg, B, T, recompute, std::max<int64_t>(refs.lowest_trained_layer, 0), adt);
    s.lora_rank = refs.lora_rank;
    s.lora_rows = s.lora_rows && refs.lora_rank > 0;
    return s;
  }

  // The tensor a listed buffer binds to; block buffers are `x`'s.
  Tensor& bind(ActId id, BlockActs& x) {
    switch (id) {
      case ActId::kLn1:
        return x.ln1;
      case ActId::kLn1Mean:
        return x.ln1_mean;
      case ActId::kLn1Rstd:
        return x.ln1_rstd;
      case ActId::kQkv:
        return x.qkv;
      case ActId::kAtty:
        return x.atty;
      case ActId::kLse:
        return x.lse;
      case ActId::kRes2:
        return x.res2;
      case ActId::kLn2:
        return x.ln2;
      case ActId::kLn2Mean:
        return x.ln2_mean;
      case ActId::kLn2Rstd:
        return x.ln2_rstd;
      case ActId::kFch:
        return x.fch;
      case ActId::kFchGelu:
        return x.fch_gelu;
      case ActId::kFchGate:
        return x.fch_gate;
      case ActId::kLnf:
        return lnf;
      case ActId::kLnfMean:
        return lnf_mean;
      case ActId::kLnfRstd:
        return lnf_rstd;
      case ActId::kLogits:
        return logits;
      case ActId::kLosses:
        return losses;
      case ActId::kDRes:
        return d_res;
      case ActId::kDA:
        return d_a;
      case ActId::kDB:
        return d_b;
      case ActId::kDWideA:
        return d_wide_a;
      case ActId::kDWideB:
        return d_wide_b;
      case ActId::kDQkv:
        return d_qkv;
      case ActId::kTmpProj:
        return tmp_proj;
      case ActId::kLoraU:
        return lora_u;
      case ActId::kLoraDu:
        return lora_du;
      case ActId::kLoraX:
        return lora_x;
      case ActId::kLoraRowsB:
        return lora_rows_b;
      case ActId::kQkRstd:
        return x.qk_rstd;
      case ActId::kResidual:
        break;
    }
    LLM_ASSERT(false, "activation ", act_name(id), " has no single tensor");
    return lnf;
  }

  // The arena holds exactly saved_activations(), the scratch exactly model_scratch(): the
  // residual stream, then block by block the block's buffers (its own, or at block 0 the one
  // shared copy the blocks below first_kept reuse), then the head's.
  void layout(Carver& a, Carver& s) {
    const ActivationSpec spec = activation_spec_now();
    const std::vector<ActBuffer> saved = saved_activations(spec);
    const int64_t L = cfg.n_layer;
    res.assign(L + 1, Tensor());
    acts.assign(L, LayerActs());
    BlockActs none, shared;
    for (const ActBuffer& b : saved)
      if (b.scope == ActScope::kResidual)
        for (int64_t l = 0; l <= L; ++l) res[l] = a.take(b);
    for (int64_t l = 0; l < L; ++l) {
      for (const ActBuffer& b : saved) {
        if (b.scope != ActScope::kBlock) continue;
        Tensor& dst = bind(b.id, acts[l]);
        if (l >= b.first_kept) {
          dst = a.take(b);
          continue;
        }
        Tensor& sh = bind(b.id, shared);
        if (l == 0) sh = a.take(b);
        dst = sh;
      }
    }
    for (const ActBuffer& b : saved)
      if (b.scope == ActScope::kGlobal) bind(b.id, none) = a.take(b);
    for (const ActBuffer& b : model_scratch(spec)) bind(b.id, none) = s.take(b);
  }

  void plan(int64_t batch, int64_t seq) {
    if (batch == B && seq == T && !arena.empty()) return;
    LLM_REQUIRE(seq <= cfg.block_size, "sequence length ", seq, " exceeds model.block_size ",
                cfg.block_size);
    B = batch;
    T = seq;
    arena.reset();
    scratch.reset();
    Carver a, s;
    layout(a, s);
    arena_bytes = a.used;
    scratch_bytes = s.used;
    arena = be.allocate(MemTag::kActivations, static_cast<size_t>(arena_bytes));
    scratch = be.allocate(MemTag::kWorkspace, static_cast<size_t>(scratch_bytes));
    batch_ids.reset();
    batch_ids = be.allocate(MemTag::kData, static_cast<size_t>(gpt_batch_ids_bytes(B, T)));
    carved_saved.clear();
    carved_scratch.clear();
    Carver a2{arena.as<char>(), 0, &carved_saved}, s2{scratch.as<char>(), 0, &carved_scratch};
    layout(a2, s2);
    if (refs.any_frozen && sink.empty()) {
      const int64_t half = sink_elements() / 2;
      sink = be.allocate(MemTag::kWorkspace, static_cast<size_t>(2 * half) * dtype_size(gdt));
      sink_a = Tensor(sink.data(), gdt);
      sink_b = sink_a.offset(half);
    }
  }

  // Elements of the gradient sink (both halves); 0 without frozen tensors.
  int64_t sink_elements() const { return gpt_frozen_sink_elements(table, cfg); }

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
    args.impl = attention_impl;
    args.kv_heads = widths.KV;
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

  GemmArgs gemm_args(Tensor a, Tensor b, Tensor c, int64_t m, int64_t n, int64_t k) const {
    GemmArgs g;
    g.a = a;
    g.b = b;
    g.c = c;
    g.m = m;
    g.n = n;
    g.k = k;
    g.bf16_inputs = bf16_matmul;
    g.tf32 = tf32_matmul;
    return g;
  }

  void linear(Tensor out, Tensor in, Tensor w, Tensor bias, int64_t rows, int64_t in_f,
              int64_t out_f) {
    GemmArgs g = gemm_args(in, w, out, rows, out_f, in_f);
    g.bias = bias;
    g.trans_b = true;
    be.gemm(g);
  }

  // The dropout key of an adapter's input: its own keyspace (bit 62), one site per layer and
  // adapted layer. GPT-2's four sites keep their keys; q, k, v and gate (sites 4..7) set bit 61.
  DropoutKey lora_key(int64_t layer, int site, int64_t in_f) const {
    const uint64_t s = ((fwd_opts.step * 1024 + static_cast<uint64_t>(layer + 1)) * 4 +
                        static_cast<uint64_t>(site % 4)) |
                       (uint64_t{1} << 62) | (site >= 4 ? uint64_t{1} << 61 : 0);
    return DropoutKey{fwd_opts.seed, s, fwd_opts.first_sequence, T * in_f};
  }
  bool lora_dropout_on() const { return fwd_opts.training && cfg.lora.dropout > 0.0; }

  // The adapter's input: x, or a dropped copy of it in lora_x.
  Tensor lora_input(Tensor x, int64_t l, int site, int64_t in_f) {
    if (!lora_dropout_on()) return x;
    const int64_t n = B * T * in_f;
    be.copy(lora_x, x, n);
    be.dropout(lora_x, n, cfg.lora.dropout, lora_key(l, site, in_f));
    return lora_x;
  }

  // lora_u = scale * drop(x) A^T
  void lora_down(Tensor x, const LoraViews& f, int64_t l, int site, int64_t in_f) {
    const int64_t N = B * T, r = refs.lora_rank;
    GemmArgs g = gemm_args(lora_input(x, l, site, in_f), f.a, lora_u, N, r, in_f);
    g.trans_b = true;
    be.gemm(g);
    be.scale(lora_u, N * r, cfg.lora.scale());
  }

  // out = x W^T + bias, plus the adapter's scale * drop(x) A^T B^T when layer (l, site) has one.
  void linear_lora(Tensor out, Tensor x, Tensor w, Tensor bias, const LoraViews& f, int64_t l,
                   int site, int64_t in_f, int64_t out_f) {
    const int64_t N = B * T;
    linear(out, x, w, bias, N, in_f, out_f);
    if (!f.present()) return;
    lora_down(x, f, l, site, in_f);
    GemmArgs g = gemm_args(lora_u, f.b, out, N, out_f, refs.lora_rank);
    g.trans_b = true;
    g.accumulate = true;
    be.gemm(g);
  }

  // q, k or v's adapter on its rows [row0, row0 + rows) of the fused qkv output (out_f wide):
  // with B placed in those rows of a zero (out_f, r) matrix, out += u B'^T adds its part exactly
  // (the other columns gain zeros) and the products need no strided views.
  void lora_place_b(const LoraViews& f, const LoraRef& ref, int64_t out_f) {
    const int64_t r = refs.lora_rank;
    be.zero(lora_rows_b, out_f * r);
    be.convert(lora_rows_b.offset(ref.row0 * r), f.b, ref.rows * r);
  }
  void lora_rows_forward(Tensor out, Tensor x, int64_t l, int site, int64_t in_f, int64_t out_f,
                         UnitAccess& units) {
    const LoraViews f = lora_params(units, l, site);
    if (!f.present()) return;
    lora_down(x, f, l, site, in_f);
    lora_place_b(f, refs.lora[l][site], out_f);
    GemmArgs g = gemm_args(lora_u, lora_rows_b, out, B * T, out_f, refs.lora_rank);
    g.trans_b = true;
    g.accumulate = true;
    be.gemm(g);
  }
  // Its backward: du = scale * dout B' (B' as above), then dB' = dout^T u into the same scratch,
  // whose rows [row0, row0 + rows) are dB; dA and dinp as any adapter's.
  void lora_rows_backward(Tensor dinp, UnitAccess& units, Tensor dout, Tensor x, int64_t l,
                          int site, int64_t in_f, int64_t out_f) {
    const LoraViews f = lora_params(units, l, site);
    if (!f.present()) return;
    const LoraViews grads = lora_grads(units, l, site);
    const LoraRef& ref = refs.lora[l][site];
    const int64_t N = B * T, r = refs.lora_rank;
    lora_down(x, f, l, site, in_f);
    lora_place_b(f, ref, out_f);
    be.gemm(gemm_args(dout, lora_rows_b, lora_du, N, r, out_f));
    be.scale(lora_du, N * r, cfg.lora.scale());
    if (!grads.b.empty()) {
      GemmArgs g = gemm_args(dout, lora_u, lora_rows_b, out_f, r, N);
      g.trans_a = true;
      be.gemm(g);
      be.accumulate(grads.b, lora_rows_b.offset(ref.row0 * r), ref.rows * r);
    }
    lora_backward_down(dinp, grads, f, x, l, site, in_f);
  }

  // The adapter's backward after the base layer's (which wrote dinp): dB += dout^T u,
  // du = scale * dout B, dA += du^T drop(x), dinp += drop'(du A).
  void lora_backward(Tensor dinp, const LoraViews& grads, const LoraViews& f, Tensor dout, Tensor x,
                     int64_t l, int site, int64_t in_f, int64_t out_f) {
    if (!f.present()) return;
    const int64_t N = B * T, r = refs.lora_rank;
    lora_down(x, f, l, site, in_f);  // recomputed: [N, r] is cheaper to redo than to keep
    if (!grads.b.empty()) {
      GemmArgs g = gemm_args(dout, lora_u, grads.b, out_f, r, N);
      g.trans_a = true;
      g.accumulate = true;
      be.gemm(g);
    }
    be.gemm(gemm_args(dout, f.b, lora_du, N, r, out_f));
    be.scale(lora_du, N * r, cfg.lora.scale());
    lora_backward_down(dinp, grads, f, x, l, site, in_f);
  }

  // From du (lora_du): dA += du^T drop(x), dinp += drop'(du A).
  void lora_backward_down(Tensor dinp, const LoraViews& grads, const LoraViews& f, Tensor x,
                          int64_t l, int site, int64_t in_f) {
    const int64_t N = B * T, r = refs.lora_rank;
    if (!grads.a.empty()) {
      GemmArgs g = gemm_args(lora_du, lora_input(x, l, site, in_f), grads.a, r, in_f, N);
      g.trans_a = true;
      g.accumulate = true;
      be.gemm(g);
    }
    if (dinp.empty()) return;
    if (!lora_dropout_on()) {
      GemmArgs g = gemm_args(lora_du, f.a, dinp, N, in_f, r);
      g.accumulate = true;
      be.gemm(g);
      return;
    }
    be.gemm(gemm_args(lora_du, f.a, lora_x, N, in_f, r));
    be.dropout(lora_x, N * in_f, cfg.lora.dropout, lora_key(l, site, in_f));
    be.accumulate(dinp, lora_x, N * in_f);
  }

  // dinp = dout @ W (written, or added with accumulate_dinp); dW += dout^T @ inp; dbias +=
  // colsum(dout). An empty dW or dbias (a frozen tensor) skips its product.
  void linear_backward(Tensor dinp, Tensor dw, Tensor dbias, Tensor dout, Tensor inp, Tensor w,
                       int64_t rows, int64_t in_f, int64_t out_f, bool accumulate_dinp = false) {
    if (!dw.empty()) {
      GemmArgs gw = gemm_args(dout, inp, dw, out_f, in_f, rows);
      gw.trans_a = true;
      gw.accumulate = true;
      be.gemm(gw);
    }
    if (!dbias.empty()) be.bias_backward(dbias, dout, rows, out_f);
    if (dinp.empty()) return;
    GemmArgs gi = gemm_args(dout, w, dinp, rows, in_f, out_f);
    gi.accumulate = accumulate_dinp;
    be.gemm(gi);
  }

  // What the training forward adds to the shared block (gpt_block.h): the LoRA adapters,
  // dropout, and attention that keeps its log-sum-exp for backward.
  struct TrainHooks final : BlockHooks {
    Impl& m;
    UnitAccess& units;
    int64_t l;
    TrainHooks(Impl& impl, UnitAccess& u, int64_t layer) : m(impl), units(u), l(layer) {}
    void linear(int site, Tensor out, Tensor in, Tensor w, Tensor bias, int64_t in_f,
                int64_t out_f) override {
      const LoraViews f = site >= 0 ? m.lora_params(units, l, site) : LoraViews{};
      m.linear_lora(out, in, w, bias, f, l, site, in_f, out_f);
      if (site == kLoraQkv)  // q, k and v's own adapters on their rows
        for (int rows_site : {kLoraQ, kLoraK, kLoraV})
          m.lora_rows_forward(out, in, l, rows_site, in_f, out_f, units);
    }
    void attention(const BlockActs& x) override {
      m.be.attention_forward(x.atty, x.lse, x.qkv, m.attn_args(l));
    }
    void branch_dropout(Tensor branch, BlockBranch which) override {
      if (!m.dropout_on()) return;
      const DropSite site = which == BlockBranch::kAttention ? kSiteAttnOut : kSiteMlpOut;
      m.be.dropout(branch, m.B * m.T * m.cfg.n_embd, m.cfg.dropout, m.drop_key(l, site));
    }
    Positions positions() const override { return {m.T, 0}; }  // B sequences of T from 0
  };

  void mlp_hidden(UnitAccess& units, int64_t l, const LayerActs& x, const BlockTensors& p) {
    TrainHooks hooks(*this, units, l);
    gpt_block_mlp_hidden(be, hooks, p, x, B * T, widths);
  }

  // Block l's forward; the caller has acquired its unit (forward or recompute).
  void block_forward(UnitAccess& units, int64_t l) {
    TrainHooks hooks(*this, units, l);
    gpt_block_forward(be, hooks, block_params(units, l), acts[l], res[l], res[l + 1], tmp_proj,
                      B * T, widths);
  }

  // A tensor of the embedding or final unit, from its trained or frozen part; empty for a
  // tensor the model does not have (offset -1: a weightless or bias-free final norm).
  Tensor unit_tensor(UnitAccess& units, int unit, int64_t at, bool frozen) const {
    if (at < 0) return Tensor();
    return (frozen ? frozen_unit(units, unit) : param_unit(units, unit)).offset(at);
  }

  // The position table; empty with rotary positions (model.position = rope).
  Tensor wpe_tensor(UnitAccess& units) const {
    return refs.wpe < 0 ? Tensor() : unit_tensor(units, refs.embed_unit, refs.wpe, refs.wpe_frozen);
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
    const int64_t N = B * T, C = cfg.n_embd, Vp = cfg.padded_vocab();
    tokens = tok;
    const int E = refs.embed_unit, F = refs.final_unit;
    units.acquire(E, UnitPhase::kForward);
    be.embedding_forward(res[0], tokens, unit_tensor(units, E, refs.wte, refs.wte_frozen),
                         wpe_tensor(units), B, T, C);
    units.release(E, UnitPhase::kForward);
    if (dropout_on()) be.dropout(res[0], N * C, cfg.dropout, drop_key(-1, kSiteEmbed));
    for (int64_t l = 0; l < cfg.n_layer; ++l) {
      units.acquire(refs.block_unit[l], UnitPhase::kForward);
      block_forward(units, l);
      units.release(refs.block_unit[l], UnitPhase::kForward);
    }
    units.acquire(F, UnitPhase::kForward);
    block_norm_forward(be, widths, lnf, lnf_mean, lnf_rstd, res[cfg.n_layer],
                       unit_tensor(units, F, refs.lnfw, refs.lnfw_frozen),
                       unit_tensor(units, F, refs.lnfb, refs.lnfb_frozen), N);
    if (untied())  // model.tie_embeddings = false: the final unit's own head
      linear(logits, lnf, unit_tensor(units, F, refs.lm_head, refs.lm_head_frozen), Tensor(), N, C,
             Vp);
    units.release(F, UnitPhase::kForward);
    if (!untied()) {
      units.acquire(E, UnitPhase::kForward);  // the tied head
      linear(logits, lnf, unit_tensor(units, E, refs.wte, refs.wte_frozen), Tensor(), N, C, Vp);
      units.release(E, UnitPhase::kForward);
    }
    // model.logit_softcap: the logits kept (for the loss, backward and sampling) are the capped.
    if (softcap_on()) be.softcap_forward(logits, logits, N * Vp, cfg.logit_softcap);
    have_targets = !tgt.empty();
    if (!have_targets) return 0.0;
    targets = tgt;
    cross_entropy(0.0);
    return be.sum(losses, N) / static_cast<double>(N);  // one scalar comes back
  }

  // The MLP activation's backward from d_wide_a (the gradient of its output): fc's output
  // gradient into d_wide_b and fc's bias gradient; SwiGLU leaves the gate's output gradient in
  // d_wide_a (its bias gradient is the gate layer's backward's).
  void mlp_act_backward(const LayerActs& x, const BlockTensors& g, bool has_bias, int64_t N,
                        int64_t F) {
    switch (widths.mlp) {
      case MlpKind::kGelu:
        if (!has_bias)  // model.bias = false: no bias gradient
          be.gelu_backward(d_wide_b, x.fch, d_wide_a, N * F);
        else
          be.gelu_bias_backward(d_wide_b, or_sink(g[kRoleFcBias], sink_a), x.fch, d_wide_a, N, F);
        return;
      case MlpKind::kRelu2:
        be.relu2_backward(d_wide_b, x.fch, d_wide_a, N * F);
        break;
      case MlpKind::kSwiglu:
        be.swiglu_backward(d_wide_a, d_wide_b, x.fch_gate, x.fch, d_wide_a, N * F);
        break;
    }
    if (!g[kRoleFcBias].empty()) be.bias_backward(g[kRoleFcBias], d_wide_b, N, F);
  }

  // A norm's backward over the micro-batch's rows into d_res (block_norm_backward): `dweight` /
  // `dbias` empty for a frozen or absent tensor. GPT-2's LayerNorm kernel writes both gradients,
  // so a frozen one goes to the sink there; the other norms just skip it.
  void norm_backward(Tensor dx, Tensor dweight, Tensor dbias, Tensor dout, Tensor x, Tensor w,
                     Tensor b, Tensor mean, Tensor rstd) {
    if (block_norm_is_gpt2(widths, w, b)) {
      dweight = or_sink(dweight, sink_a);
      dbias = or_sink(dbias, sink_b);
    }
    block_norm_backward(be, widths, dx, dweight, dbias, dout, x, w, b, mean, rstd, B * T);
  }

  // Block l's backward from d_res (the gradient of the block's output), leaving the gradient of
  // its input in d_res; the caller has acquired its unit for backward.
  void block_backward(UnitAccess& units, int64_t l) {
    const int64_t N = B * T, C = cfg.n_embd, F = widths.F, QKV = widths.qkv;
    const LayerActs& x = acts[l];
    const BlockTensors p = block_params(units, l);
    const BlockTensors g = block_grads(units, l);
    // MLP: res[l+1] = res2 + drop(proj(act(fc(ln2(res2)))))
    Tensor dy = d_res;
    if (dropout_on()) {
      be.convert(d_a, d_res, N * C);
      be.dropout(d_a, N * C, cfg.dropout, drop_key(l, kSiteMlpOut));
      dy = d_a;
    }
    if (recompute == Recompute::kMlp) mlp_hidden(units, l, x, p);
    linear_backward(d_wide_a, g[kRoleFcProjWeight], g[kRoleFcProjBias], dy, x.fch_gelu,
                    p[kRoleFcProjWeight], N, F, C);
    lora_backward(d_wide_a, lora_grads(units, l, kLoraFcproj), lora_params(units, l, kLoraFcproj),
                  dy, x.fch_gelu, l, kLoraFcproj, F, C);
    // d_wide_b: the gradient of fc's output (SwiGLU: of up's, with the gate's in d_wide_a).
    mlp_act_backward(x, g, !p[kRoleFcBias].empty(), N, F);
    linear_backward(d_b, g[kRoleFcWeight], Tensor(), d_wide_b, x.ln2, p[kRoleFcWeight], N, C, F);
    lora_backward(d_b, lora_grads(units, l, kLoraFc), lora_params(units, l, kLoraFc), d_wide_b,
                  x.ln2, l, kLoraFc, C, F);
    if (widths.mlp == MlpKind::kSwiglu) {  // the gate's input gradient joins up's
      linear_backward(d_b, g[kRoleFcGateWeight], g[kRoleFcGateBias], d_wide_a, x.ln2,
                      p[kRoleFcGateWeight], N, C, F, true);
      lora_backward(d_b, lora_grads(units, l, kLoraGate), lora_params(units, l, kLoraGate),
                    d_wide_a, x.ln2, l, kLoraGate, C, F);
    }
    norm_backward(d_res, g[kRoleLn2Weight], g[kRoleLn2Bias], d_b, x.res2, p[kRoleLn2Weight],
                  p[kRoleLn2Bias], x.ln2_mean, x.ln2_rstd);
    // Attention: res2 = res[l] + drop(proj(attn(qkv(ln1(res[l])))))
    dy = d_res;
    if (dropout_on()) {
      be.convert(d_a, d_res, N * C);
      be.dropout(d_a, N * C, cfg.dropout, drop_key(l, kSiteAttnOut));
      dy = d_a;
    }
    linear_backward(d_b, g[kRoleAttnProjWeight], g[kRoleAttnProjBias], dy, x.atty,
                    p[kRoleAttnProjWeight], N, C, C);
    lora_backward(d_b, lora_grads(units, l, kLoraProj), lora_params(units, l, kLoraProj), dy,
                  x.atty, l, kLoraProj, C, C);
    be.attention_backward(d_qkv, d_b, x.qkv, x.atty, x.lse, attn_args(l));
    gpt_block_qk_backward(be, d_qkv, x, N, {T, 0}, widths);
    linear_backward(d_a, g[kRoleQkvWeight], g[kRoleQkvBias], d_qkv, x.ln1, p[kRoleQkvWeight], N, C,
                    QKV);
    lora_backward(d_a, lora_grads(units, l, kLoraQkv), lora_params(units, l, kLoraQkv), d_qkv,
                  x.ln1, l, kLoraQkv, C, QKV);
    for (int rows_site : {kLoraQ, kLoraK, kLoraV})
      lora_rows_backward(d_a, units, d_qkv, x.ln1, l, rows_site, C, QKV);
    norm_backward(d_res, g[kRoleLn1Weight], g[kRoleLn1Bias], d_a, res[l], p[kRoleLn1Weight],
                  p[kRoleLn1Bias], x.ln1_mean, x.ln1_rstd);
  }

  // model.tie_embeddings = false / model.logit_softcap > 0.
  bool untied() const { return refs.lm_head >= 0; }
  bool softcap_on() const { return cfg.logit_softcap > 0.0; }
  // The loss of the logits (capped, with the soft-cap) and, with grad_scale != 0, their gradient
  // in their place.
  void cross_entropy(double grad_scale) {
    const int64_t N = B * T, V = cfg.vocab_size, Vp = cfg.padded_vocab();
    if (softcap_on())
      be.softcap_cross_entropy(losses, logits, targets, N, V, Vp, grad_scale, cfg.logit_softcap);
    else
      be.softmax_cross_entropy(losses, logits, targets, N, V, Vp, grad_scale);
  }

  void backward(UnitAccess& units, double loss_scale) {
    LLM_ASSERT(have_targets, "backward needs a forward with targets");
    const int64_t N = B * T, C = cfg.n_embd, L = cfg.n_layer;
    const int64_t Vp = cfg.padded_vocab();
    const int E = refs.embed_unit, F = refs.final_unit;
    // dlogits in place of the logits (the forward kept them intact; with the soft-cap, the
    // gradient of the uncapped logits).
    cross_entropy(loss_scale / static_cast<double>(N));
    have_targets = false;  // logits are now gradients: a second backward would be wrong
    // Frozen tensors get no gradient: their weight-gradient products are skipped, and backward
    // stops below the lowest block that trains anything.
    const int64_t lowest = refs.lowest_trained_layer;
    Tensor dembed;
    if (!untied()) {
      units.acquire(E, UnitPhase::kBackward);
      dembed = grad_unit(units, E);
      linear_backward(d_a, refs.wte_frozen ? Tensor() : dembed.offset(refs.wte), Tensor(), logits,
                      lnf, unit_tensor(units, E, refs.wte, refs.wte_frozen), N, C, Vp);
      units.release(E, UnitPhase::kBackward);
    }
    units.acquire(F, UnitPhase::kBackward);
    Tensor dfin = grad_unit(units, F);
    if (untied())
      linear_backward(d_a, refs.lm_head_frozen ? Tensor() : dfin.offset(refs.lm_head), Tensor(),
                      logits, lnf, unit_tensor(units, F, refs.lm_head, refs.lm_head_frozen), N, C,
                      Vp);
    be.zero(d_res, N * C);
    norm_backward(d_res, refs.lnfw < 0 || refs.lnfw_frozen ? Tensor() : dfin.offset(refs.lnfw),
                  refs.lnfb < 0 || refs.lnfb_frozen ? Tensor() : dfin.offset(refs.lnfb), d_a,
                  res[L], unit_tensor(units, F, refs.lnfw, refs.lnfw_frozen),
                  unit_tensor(units, F, refs.lnfb, refs.lnfb_frozen), lnf_mean, lnf_rstd);
    units.release(F, UnitPhase::kBackward);
    units.grads_done(F);
    for (int64_t l = L - 1; l >= 0; --l) {
      const int u = refs.block_unit[l];
      if (l < lowest) continue;  // nothing trains here or below: no backward, no gradients
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
    if (lowest < 0) {
      if (dropout_on()) be.dropout(d_res, N * C, cfg.dropout, drop_key(-1, kSiteEmbed));
      units.acquire(E, UnitPhase::kBackward);
      dembed = grad_unit(units, E);
      const Tensor dwpe =
          refs.wpe < 0 ? Tensor() : (refs.wpe_frozen ? sink_a : dembed.offset(refs.wpe));
      be.embedding_backward(refs.wte_frozen ? sink_a : dembed.offset(refs.wte), dwpe, d_res, tokens,
                            B, T, C);
      units.release(E, UnitPhase::kBackward);
    }
    // Untied, the embeddings' gradients come from their own backward only: none without it.
    if (!untied() || lowest < 0) units.grads_done(E);
  }
};

int64_t gpt_frozen_sink_elements(const ParamTable& table, const ModelConfig& config) {
  if (!param_table_has_frozen(table)) return 0;
  // Norm weights and biases: the widest vector of the recipe each half; a frozen embedding beside
  // a trained one: its whole size in the first half.
  int64_t half = recipe_widest_vector(block_recipe(config));
  const ParamInfo& wte = table.find("embed.wte");
  if (table.index_of("embed.wpe") >= 0) {  // none with rotary positions
    const ParamInfo& wpe = table.find("embed.wpe");
    if (wte.trainable != wpe.trainable)
      half = std::max(half, wte.trainable ? wpe.numel : wte.numel);
  }
  return 2 * half;
}

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
void GptModel::set_attention_impl(AttentionImpl impl) {
  impl_->attention_impl = impl;
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
const std::vector<CarvedBuffer>& GptModel::carved_activations() const {
  return impl_->carved_saved;
}
const std::vector<CarvedBuffer>& GptModel::carved_scratch() const {
  return impl_->carved_scratch;
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
  LLM_ASSERT(!param_table_has_frozen(table_), "flat forward: frozen tensors need a UnitAccess");
  FlatUnits units(table_, params);
  return impl_->forward_host(units, tokens, targets, batch, seq, options);
}

void GptModel::backward(Tensor params, Tensor grads, double loss_scale) {
  LLM_ASSERT(grads.dtype == impl_->gdt, "gradient dtype mismatch");
  LLM_ASSERT(!param_table_has_frozen(table_), "flat backward: frozen tensors need a UnitAccess");
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
