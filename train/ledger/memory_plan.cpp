// The memory planner's formulas (see memory_plan.h).
//
// Model state. E flat elements (N parameters plus alignment/unit padding, which is allocated and
// therefore counted), p/g bytes per element for the compute copy and gradients:
//   params E*p, grads E*g, master E*4 (only when the compute copy is not fp32), optimizer states
//   per optimizer (below). ZeRO stage s on D ranks divides: s>=1 master and states, s>=2 grads,
//   s=3 params; so stage 0: (p+g+K)N, 1: (p+g)N + K N/D, 2: pN + (g+K)N/D, 3: (p+g+K)N/D.
//   fp32 weights are their own master at every stage (updated in place). A rank's shard is
//   exact when the units are known: piece r of every unit, and per-tensor states (Adafactor's
//   factored statistics, 8-bit blocks) of the tensor parts in it.
// Communication buffers (D > 1), as the sharded step allocates them (train/step/model_state.h,
// train/step/zero_units.h): 16-bit gradients are summed in an fp32 staging unit (stages 0-1 reduce
// the whole gradient buffer in place); stages 2-3 keep whole-unit gradient buffers for the
// embedding unit and for the largest other unit; stage 3 gathers weights into one unit-sized
// buffer (or one per unit without resharding after forward).
// Activations and the model's scratch: the sums of the model's own lists of its buffers
// (model/activation_list.h) for the micro-batch, recompute mode and trained blocks predicted here.
#include "train/ledger/memory_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "data/meta.h"
#include "model/backends/cpu_facts.h"
#include "model/base/check.h"
#include "model/gpt.h"
#include "optim/muon_plan.h"
#include "optim/optim_traits.h"
#include "train/offload/offload_backend.h"
#include "train/step/gns.h"
#include "train/step/placement.h"
#include "train/step/precision_plan.h"

namespace ledgerlm {
namespace {

int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}
int64_t ceil_div(int64_t x, int64_t d) {
  return (x + d - 1) / d;
}
// The CPU backend grows each scratch slot to a multiple of 4 KiB.
int64_t page_buf(int64_t bytes) {
  return bytes > 0 ? round_up(bytes, 4096) : 0;
}

struct Builder {
  const PlanInput& in;
  MemoryPlan* plan;

  // per_rank < 0: the whole `bytes` on every rank, or an even share when sharded.
  void add(const std::string& name, MemTag tag, const std::string& dtype, int64_t bytes,
           bool model_state, bool optimizer, bool sharded, int64_t per_rank = -1) {
    PlanComponent c;
    c.name = name;
    c.tag = tag;
    c.dtype = dtype;
    c.model_state = model_state;
    c.optimizer = optimizer;
    c.sharded = sharded && in.world > 1;
    if (model_state) {  // the planner predicts every group together, all of it trainable
      c.group = "all";
      c.trainable = "trainable";
    }
    c.total_bytes = bytes;
    c.per_rank_bytes = per_rank >= 0 ? per_rank : (c.sharded ? ceil_div(bytes, in.world) : bytes);
    c.num_params = in.num_params;
    plan->components.push_back(c);
  }
};

// A tensor's part held by one rank (or the whole tensor, for a full copy).
struct HeldPart {
  const PlanTensor* tensor = nullptr;
  int64_t count = 0;
  bool first = false;  // holds the tensor's element 0
};

bool shards_known(const PlanInput& x) {
  return x.zero >= 1 && x.world > 1 && !x.units.empty();
}

// Elements of this rank's piece of unit u, and where it starts in the flat layout.
int64_t unit_piece(const PlanInput& x, size_t u) {
  return x.units[u].second / x.world;
}

// The tensor parts a rank holds: whole tensors for the full copy or without a known layout.
std::vector<HeldPart> held_parts(const PlanInput& x, bool full) {
  std::vector<HeldPart> out;
  for (const PlanTensor& t : x.tensors) {
    if (full || !shards_known(x)) {
      out.push_back({&t, t.numel, true});
      continue;
    }
    const size_t u = static_cast<size_t>(t.unit);
    const int64_t lo = x.units[u].first + x.rank * unit_piece(x, u);
    const int64_t hi = lo + unit_piece(x, u);
    const int64_t a = std::max(lo, t.offset), b = std::min(hi, t.offset + t.numel);
    if (a < b) out.push_back({&t, b - a, a == t.offset});
  }
  return out;
}

// Elements of the compact buffers that mirror the layout (m, v, momentum, master shard).
int64_t mirror_elements(const PlanInput& x, bool full) {
  if (full || x.zero < 1 || x.world == 1) return x.elements;
  if (x.units.empty()) return ceil_div(x.elements, x.world);
  int64_t n = 0;
  for (size_t u = 0; u < x.units.size(); ++u) n += unit_piece(x, u);
  return n;
}

// One optimizer state component: element counts of the full copy and of this rank's shard.
struct StateCount {
  std::string name;
  MemTag tag;
  DType dtype;
  int64_t total = 0, per_rank = 0;
  std::string group = "all";
};

// Elements of state component `c` for `count` elements held of a tensor of `rows` x `cols`.
int64_t state_extent(const StateComponentTraits& c, int64_t count, int64_t rows, int64_t cols,
                     int64_t block) {
  switch (c.extent) {
    case StateExtent::kPerElement:
      return c.block_aligned ? round_up(count, block) : count;
    case StateExtent::kPerBlock:
      return ceil_div(count, block);
    case StateExtent::kRows:
      return rows;
    case StateExtent::kCols:
      return cols;
  }
  return 0;
}

const OptimTraits& planned_optimizer(const OptimConfig& o) {
  const OptimTraits* t = optim_traits_find(o.name);
  if (t == nullptr)
    fail("optim.name = '" + o.name + "': the planner knows " + optim_names_text(", ", " or "));
  return *t;
}

// The states optimizer `o` allocates for the tensor parts `parts` with mirrored buffers of
// `mirror` elements, in allocation order: its traits' components, then its host scalars.
std::vector<StateCount> optimizer_states(const PlanInput& in, const std::vector<HeldPart>& parts,
                                         int64_t mirror, bool full) {
  const OptimConfig& o = in.optim;
  const OptimTraits& traits = planned_optimizer(o);
  std::vector<StateCount> out;
  auto add = [&](const std::string& name, MemTag tag, DType dt, int64_t elements,
                 const std::string& group) {
    out.push_back({name, tag, dt, full ? elements : 0, full ? 0 : elements, group});
  };
  // Without tensor shapes (--params) every parameter counts as one square tensor of the
  // optimizer's primary kind: N elements (N / D on a rank), sqrt(N) rows and columns.
  const int64_t held_all = full ? in.num_params : ceil_div(in.num_params, in.world);
  const int64_t side = static_cast<int64_t>(std::sqrt(in.num_params * 1.0));
  for (const StateComponentTraits& c : traits.states) {
    if (!optim_state_present(c, o)) continue;
    int64_t n = 0;
    if (c.covers == StateCovers::kAll && c.extent == StateExtent::kPerElement) {
      n = mirror;  // a buffer that mirrors the layout, padding included
    } else if (in.tensors.empty()) {
      if (optim_state_covers(c, true)) n = state_extent(c, held_all, side, side, o.block_size);
    } else {
      for (const HeldPart& h : parts)
        if (optim_state_covers(c, h.tensor->primary))
          n += state_extent(c, h.count, h.tensor->rows, h.tensor->cols, o.block_size);
    }
    add("optim." + c.name, c.tag, optim_state_dtype(c, o), n, c.group);
  }
  // Optimizer-wide host scalars (step counters and the like): the same on every rank.
  if (traits.host_scalars > 0)
    add("optim.scalars", MemTag::kOptimFactored, DType::kF64, traits.host_scalars, "all");
  // optim.ema_half_life: the average of the weights beside any optimizer (mirrors the layout),
  // and its count of averaged steps.
  if (o.ema_half_life > 0.0) {
    add("optim.ema", MemTag::kAverage, DType::kF32, mirror, "all");
    add("optim.ema_steps", MemTag::kOptimFactored, DType::kF64, 1, "all");
  }
  return out;
}

// The sharded step's communication buffers on one rank (see the header comment).
int64_t comm_bytes(const PlanInput& x, MemoryPlan& plan) {
  const int64_t p = static_cast<int64_t>(dtype_size(x.params));
  const int64_t g = static_cast<int64_t>(dtype_size(x.grads));
  const bool wide = x.grads == DType::kF32;
  int64_t unit = x.largest_unit, embed = x.largest_unit, other = x.largest_unit;
  if (!x.units.empty()) {
    embed = x.units[static_cast<size_t>(x.embed_unit)].second;
    other = 0;
    for (size_t u = 0; u < x.units.size(); ++u)
      if (static_cast<int64_t>(u) != x.embed_unit) other = std::max(other, x.units[u].second);
  }
  if (unit <= 0) {
    plan.notes.push_back("comm: sharding-unit sizes unknown (give --layers): not counted");
    return 0;
  }
  const int64_t staging = wide ? 0 : unit * 4;  // a 16-bit unit summed in fp32
  if (x.zero <= 1) return staging;
  int64_t bytes = embed * g + other * g + staging;
  if (x.zero == 3) bytes += x.reshard_after_forward ? unit * p : x.elements * p;
  return bytes;
}

void add_optimizer_states(Builder& b, const PlanInput& in) {
  const OptimTraits& traits = planned_optimizer(in.optim);
  bool factored = false;
  for (const StateComponentTraits& c : traits.states)
    factored = factored || c.extent == StateExtent::kRows || c.extent == StateExtent::kCols;
  if (factored && in.tensors.empty())
    b.plan->notes.push_back(traits.name +
                            ": no tensor shapes (--params): row/col statistics approximated as "
                            "2 sqrt(N)");
  std::vector<StateCount> total =
      optimizer_states(in, held_parts(in, true), mirror_elements(in, true), true);
  const bool sharded = in.zero >= 1 && in.world > 1;
  const std::vector<StateCount> rank =
      optimizer_states(in, held_parts(in, false), mirror_elements(in, false), false);
  for (size_t i = 0; i < total.size(); ++i) {
    const int64_t es = static_cast<int64_t>(dtype_size(total[i].dtype));
    const int64_t per_rank =
        !sharded ? total[i].total * es
                 : (shards_known(in) || in.tensors.empty() ? rank[i].per_rank * es : -1);
    b.add(total[i].name, total[i].tag, dtype_name(total[i].dtype), total[i].total * es, true, true,
          sharded, per_rank);
    b.plan->components.back().group = total[i].group;
  }
}

// Muon's scratch on this rank (optim/muon.cpp), for an optimizer that works on whole matrices on
// owner ranks (WholeTensor::kOnOwner): the blended pieces it holds; on owners, when anything
// travels, the gathered tensors and one tensor reassembled from several ranks' pieces; the
// Newton–Schulz buffers of the largest matrix it orthogonalises.
void add_muon_scratch(Builder& b, const PlanInput& x) {
  const OptimTraits& traits = planned_optimizer(x.optim);
  if (traits.whole != WholeTensor::kOnOwner) return;
  if (x.tensors.empty()) {
    b.plan->notes.push_back(traits.name +
                            ": no tensor shapes: its exchange and Newton-Schulz buffers are "
                            "not counted");
    return;
  }
  const bool sharded = x.zero >= 1 && x.world > 1;
  int64_t held = 0, gathered = 0, whole = 0, iterate = 0, gram = 0;
  bool exchanged = false;
  for (const HeldPart& h : held_parts(x, false))
    if (h.tensor->muon) held += h.count;
  for (const PlanTensor& t : x.tensors) {
    if (!t.muon) continue;
    int holders = 1;
    bool owner_holds_all = true;
    if (sharded) {
      const int64_t piece = unit_piece(x, static_cast<size_t>(t.unit));
      const int64_t rel = t.offset - x.units[static_cast<size_t>(t.unit)].first;
      const int64_t first = rel / piece, last = (rel + t.numel - 1) / piece;
      holders = static_cast<int>(last - first + 1);
      owner_holds_all = holders == 1 && first == t.owner;
    }
    exchanged = exchanged || !owner_holds_all;
    if (sharded && t.owner != x.rank) continue;  // orthogonalised elsewhere
    gathered += t.numel;
    if (holders > 1) whole = std::max(whole, t.numel);
    const int64_t rows = t.rows / std::max(t.split, 1), k = std::min(rows, t.cols);
    iterate = std::max(iterate, rows * t.cols);
    gram = std::max(gram, k * k);
  }
  b.add("comm.muon", MemTag::kComm, "fp32", (held + (exchanged ? gathered : 0)) * 4, false, false,
        false);
  b.add("workspace.muon", MemTag::kWorkspace, "fp32",
        ((exchanged ? whole : 0) + iterate + 2 * gram) * 4, false, false, false);
}

}  // namespace

double PlanComponent::bytes_per_param() const {
  if (!model_state || num_params <= 0) return 0.0;
  return static_cast<double>(total_bytes) / static_cast<double>(num_params);
}

int64_t MemoryPlan::per_rank_for_tag(MemTag tag) const {
  int64_t sum = 0;
  for (const auto& c : components)
    if (c.tag == tag && c.location != "disk") sum += c.per_rank_bytes;
  return sum;
}

double plan_optimizer_bytes_per_param(const OptimConfig& o) {
  // The master, and the states as the optimizer's traits list them. Muon: the momentum of the
  // 2-D weights (most of a GPT's parameters); its AdamW group adds s per parameter of the
  // embeddings, biases and norms, which per-tensor plans count exactly.
  if (optim_traits_find(o.name) == nullptr)
    fail("optim.name = '" + o.name + "': unknown optimizer");
  return optim_state_bytes_per_param(o, 4.0);
}

ActivationSpec plan_activation_spec(const PlanShapes& s, int64_t batch, Recompute recompute) {
  // The block's widths (qkv, F) come from the model's recipe for these dimensions, as the
  // model's own spec does; the trainer's activations are fp32 at every precision.
  ActivationSpec a =
      activation_spec(s.model(), batch, s.seq, recompute, s.untrained_blocks, DType::kF32);
  a.padded_vocab = s.padded_vocab;
  a.lora_rank = s.lora_rank;
  a.lora_dropout = s.lora_dropout;
  a.lora_rows = s.lora_rows;
  return a;
}

int64_t plan_activation_bytes(const PlanShapes& s, int64_t batch, Recompute recompute) {
  if (!s.known()) return 0;
  return act_list_bytes(saved_activations(plan_activation_spec(s, batch, recompute)));
}

int64_t plan_model_scratch_bytes(const PlanShapes& s, int64_t batch) {
  if (!s.known()) return 0;
  return act_list_bytes(model_scratch(plan_activation_spec(s, batch, Recompute::kNone)));
}

int64_t plan_cudnn_attention_bytes(const PlanShapes& s, int64_t batch) {
  const int64_t btc = batch * s.seq * s.n_embd;
  // The bf16 slots: qkv and dqkv (3C each), out and dout (C each), 2 bytes an element.
  const int64_t copies = 2 * (3 * btc + 3 * btc + btc + btc);
  // The deterministic backward's engine: a bf16 dP buffer over 64 x 64 tiles of the score
  // matrix and an fp32 softmax row sum (the frontend's sizes for its dP-workspace path). An
  // estimate: the engine reports its workspace only once its graph is built on a GPU.
  const int64_t t64 = (s.seq + 63) / 64 * 64;
  const int64_t engine = batch * s.n_head * t64 * t64 * 2 + batch * s.n_head * s.seq * 4;
  return copies + engine;
}

int64_t plan_cpu_workspace_bytes(const PlanInput& x) {
  const PlanShapes& s = x.shapes;
  const int64_t P = std::max<int64_t>(x.threads, 1);
  // Gradient-norm partial sums: one double per 32768-element chunk of the gradients the
  // optimizer reads (this rank's shard from stage 1).
  int64_t partials = ceil_div(mirror_elements(x, false), 32768) * 8;
  if (!s.known()) return page_buf(partials);
  const int64_t N = x.micro_batch * s.seq, C = s.n_embd, Vp = s.padded_vocab, F = s.ffn_width();
  // The widest output of a block's linear layers (the fused qkv's C + 2 KV hd, 3C without
  // grouped-query attention, or the MLP's F): its bias and its weight's rows.
  const int64_t QKV = s.qkv_width();
  const int64_t wide_out = std::max(QKV, F);
  const bool p16 = x.params != DType::kF32, g16 = x.grads != DType::kF32;
  // 16-bit weights / gradients are widened to fp32 for BLAS: the largest matrix (the tied token
  // embedding, an MLP weight or the qkv weight).
  const int64_t widest = std::max(Vp * C, wide_out * C) * 4;
  int64_t gemm_a = 0, gemm_b = p16 ? widest : 0;
  // 16-bit gradients are widened as the C of the weight-gradient products that run.
  int64_t widest_grad = s.head_weight_grad ? Vp * C : 0;
  if (s.block_weight_grads) widest_grad = std::max(widest_grad, wide_out * C);
  if (s.lora_rank > 0) widest_grad = std::max(widest_grad, wide_out * s.lora_rank);
  const int64_t gemm_c = g16 ? widest_grad * 4 : 0;
  if (x.bf16_matmul) {
    // Every linear layer's three GEMMs (forward, input gradient, weight gradient) as
    // op(A) [m,k] x op(B) [k,n]. The native kernel packs both operands into bf16 pairs
    // (cpu_gemm_bf16_packed_*); the portable path keeps an fp32 bf16-rounded copy of each.
    const bool native = cpu_backend_bf16_dot();
    gemm_b = 0;
    const int64_t layers[5][2] = {{C, QKV}, {C, C}, {C, F}, {F, C}, {C, Vp}};
    for (const auto& io : layers) {
      const int64_t in = io[0], out = io[1];
      const int64_t gemms[3][3] = {{N, out, in}, {N, in, out}, {out, in, N}};  // m, n, k
      for (const auto& g : gemms) {
        const int64_t m = g[0], n = g[1], k = g[2];
        gemm_a = std::max(gemm_a, native ? cpu_backend_bf16_packed_a(m, k) * 4 : m * k * 4);
        gemm_b = std::max(gemm_b, native ? cpu_backend_bf16_packed_b(n, k) * 4 : k * n * 4);
      }
    }
  }
  // The GEMM library's scratchpad (oneDNN matmul primitives; cpu_gemm_lib.h), the largest over
  // the step's fp32 GEMMs: forward x W^T (+= with a bias), input gradients, weight gradients (+=).
  // precision.matmul = bf16 on the native kernel needs none.
  int64_t gemm_lib = 0;
  if (!(x.bf16_matmul && cpu_backend_bf16_dot())) {
    const int64_t layers[5][3] = {
        {C, QKV, 1}, {C, C, 1}, {C, F, 1}, {F, C, 1}, {C, Vp, 0}};  // in, out, bias
    for (size_t i = 0; i < 5; ++i) {
      const int64_t in = layers[i][0], out = layers[i][1];
      const bool weight_grad = i == 4 ? s.head_weight_grad : s.block_weight_grads;
      gemm_lib =
          std::max({gemm_lib, cpu_backend_gemm_workspace(false, true, N, out, in, layers[i][2]),
                    weight_grad ? cpu_backend_gemm_workspace(true, false, out, in, N, true) : 0,
                    cpu_backend_gemm_workspace(false, false, N, in, out, false)});
      if (s.lora_rank > 0 && i < 4 && s.lora_on[i]) {  // adapters: (m, n, k) of their six products
        const int64_t r = s.lora_rank;
        gemm_lib = std::max({gemm_lib, cpu_backend_gemm_workspace(false, true, N, r, in, false),
                             cpu_backend_gemm_workspace(false, true, N, out, r, true),
                             cpu_backend_gemm_workspace(true, false, out, r, N, true),
                             cpu_backend_gemm_workspace(false, false, N, r, out, false),
                             cpu_backend_gemm_workspace(true, false, r, in, N, true),
                             cpu_backend_gemm_workspace(false, false, N, in, r, !s.lora_dropout)});
        if (i == 0 && s.lora_rows)  // q, k, v: dB' = dout^T u written, not accumulated
          gemm_lib = std::max(gemm_lib, cpu_backend_gemm_workspace(true, false, out, r, N, false));
      }
    }
  }
  const int64_t small_params = std::max<int64_t>(2 * C, p16 ? wide_out : 0) * 4;
  // Bias-gradient partial rows per thread chunk (the widest bias).
  partials = std::max(partials, std::min(P, N) * wide_out * 4);
  // Per-thread attention blocks (two 32 x T blocks, a T mask row, three hd x T head copies;
  // 32 = kQueryBlock of model/backend/cpu/cpu_attention.cpp) and embedding-gradient rows (C).
  const int64_t hd = C / std::max<int64_t>(s.n_head, 1);
  const int64_t per_thread =
      std::max(P * (2 * 32 + 1 + 3 * hd) * s.seq, s.embedding_backward ? P * C : 0) * 4;
  // Token grouping of the embedding backward: 2N + 1 int64.
  const int64_t index = s.embedding_backward ? (2 * N + 1) * 8 : 0;
  return page_buf(gemm_a) + page_buf(gemm_b) + page_buf(gemm_c) + page_buf(small_params) +
         page_buf(partials) + page_buf(per_thread) + page_buf(index) + page_buf(gemm_lib);
}

MemoryPlan memory_plan_compute(const PlanInput& in) {
  LLM_REQUIRE(in.num_params > 0, "memory plan: the parameter count must be > 0");
  LLM_REQUIRE(in.world >= 1, "memory plan: --world must be >= 1");
  LLM_REQUIRE(in.zero >= 0 && in.zero <= 3, "memory plan: --zero must be 0, 1, 2 or 3");
  LLM_REQUIRE(in.micro_batch >= 1 && in.accum >= 1,
              "memory plan: micro-batch and accum must be >= 1");
  MemoryPlan plan;
  plan.input = in;
  if (plan.input.elements < in.num_params) plan.input.elements = in.num_params;
  const PlanInput& x = plan.input;
  const int64_t E = x.elements;
  Builder b{x, &plan};

  const int64_t p = static_cast<int64_t>(dtype_size(x.params));
  const int64_t g = static_cast<int64_t>(dtype_size(x.grads));
  const bool sharding = x.world > 1 && x.zero >= 1;
  const int64_t L = mirror_elements(x, false);  // this rank's shard (E when not sharding)
  b.add("params", MemTag::kParams, dtype_name(x.params), E * p, true, false, x.zero >= 3,
        x.zero >= 3 && sharding ? L * p : -1);
  if (x.frozen_params > 0) {
    // Frozen weights: whole on every rank (no gradient to shard them by), no grads, master or
    // state.
    b.add("params.frozen", MemTag::kParams, dtype_name(x.params), x.frozen_elements * p, true,
          false, false);
    plan.components.back().trainable = "frozen";
    plan.components.back().num_params = x.frozen_params;
  }
  b.add("grads", MemTag::kGrads, dtype_name(x.grads), E * g, true, false, x.zero >= 2,
        x.zero >= 2 && sharding ? L * g : -1);
  if (x.separate_master)
    b.add("master", MemTag::kMaster, "fp32", E * 4, true, true, sharding, sharding ? L * 4 : -1);
  else if (x.params == DType::kF32)
    plan.notes.push_back("master: the fp32 params are their own master copy");
  add_optimizer_states(b, x);

  const PlanShapes& s = x.shapes;
  if (s.known()) {
    b.add("activations", MemTag::kActivations, "fp32",
          plan_activation_bytes(s, x.micro_batch, x.recompute), false, false, false);
    b.add("workspace.model", MemTag::kWorkspace, "fp32", plan_model_scratch_bytes(s, x.micro_batch),
          false, false, false);
    // The micro-batch's token ids and targets in backend memory (int32, 64-byte aligned each).
    b.add("data.batch", MemTag::kData, "int32", gpt_batch_ids_bytes(x.micro_batch, s.seq), false,
          false, false);
  } else {
    plan.notes.push_back("activations: not predicted (give --layers --hidden --heads --seq)");
  }
  if (x.cudnn_attention && s.known())
    b.add("workspace.cudnn_attention", MemTag::kWorkspace, "bf16",
          plan_cudnn_attention_bytes(s, x.micro_batch), false, false, false);
  if (x.cpu_workspace)
    b.add("workspace.backend", MemTag::kWorkspace, "-", plan_cpu_workspace_bytes(x), false, false,
          false);
  if (x.frozen_sink > 0)  // gradients of frozen norm weights and biases, written and never read
    b.add("workspace.frozen_sink", MemTag::kWorkspace, dtype_name(x.grads), x.frozen_sink * g,
          false, false, false);
  if (x.gns_buffer)  // train.gns: the step's gradient sum beside one micro-batch's (gns.h)
    b.add("workspace.gns", MemTag::kWorkspace, dtype_name(x.grads), E * g, false, false, false);
  if (x.master_none)  // fp32 view of the compute copy the optimizer updates
    b.add("workspace.master", MemTag::kWorkspace, "fp32", E * 4, false, false, sharding,
          sharding ? L * 4 : -1);
  if (x.world > 1) b.add("comm", MemTag::kComm, "-", comm_bytes(x, plan), false, false, false);
  add_muon_scratch(b, x);
  if (x.data_bytes >= 0)
    b.add("data", MemTag::kData, "-", x.data_bytes, false, false, false);
  else
    plan.notes.push_back("data: the loader's token shards are not included (no prepared data)");

  if (x.optim.offload == "disk") {
    // The master and the parameter-shaped states live in files; RAM holds the staging arena.
    for (auto& c : plan.components)
      if (c.model_state && offload_tag_paged(c.tag)) c.location = "disk";
    b.add("offload.staging", MemTag::kOffloadStaging, "-", x.offload_staging, false, false, false);
  }
  if (x.optim.offload == "host") {
    // A device run: the master and the states in host memory, with host images of the reduced
    // gradients (down) and of the compute copy (up).
    for (auto& c : plan.components)
      if (c.model_state && offload_tag_paged(c.tag)) c.location = "host";
    int64_t images = 0;
    for (const auto& c : plan.components)
      if (c.tag == MemTag::kParams && c.trainable != "frozen")
        images += c.per_rank_bytes;
      else if (c.tag == MemTag::kGrads)
        images += c.per_rank_bytes;
    b.add("offload.host", MemTag::kOffloadStaging, "-", images, false, false, false);
    plan.components.back().location = "host";
  }
  for (const auto& c : plan.components) {
    if (c.model_state) plan.model_state_bytes += c.total_bytes;
    if (c.model_state) plan.model_state_per_rank += c.per_rank_bytes;
    if (c.optimizer) plan.optimizer_bytes += c.total_bytes;
    if (c.location == "disk")
      plan.disk_per_rank += c.per_rank_bytes;
    else if (c.location == "host")
      plan.host_per_rank += c.per_rank_bytes;
    else
      plan.per_rank_peak += c.per_rank_bytes;
  }
  plan.global_batch = x.world * x.micro_batch * x.accum;
  plan.ckpt_weights_bytes = x.num_params * static_cast<int64_t>(dtype_size(x.params));
  plan.ckpt_full_bytes = plan_ckpt_full_bytes(plan);
  return plan;
}

int64_t plan_ckpt_full_bytes(const MemoryPlan& plan) {
  // Checkpoints hold the real tensors (no padding): weights in the compute dtype; the full
  // training state adds the fp32 master (unless the params are it) and the optimizer states,
  // whose padded bytes are scaled to the real parameters.
  const PlanInput& x = plan.input;
  int64_t states = 0;
  for (const auto& c : plan.components)
    if (c.optimizer && c.tag != MemTag::kMaster) states += c.total_bytes;
  const int64_t N = x.num_params;
  const int64_t states_real =
      static_cast<int64_t>(static_cast<double>(states) * static_cast<double>(N) /
                           static_cast<double>(std::max<int64_t>(x.elements, 1)));
  return N * static_cast<int64_t>(dtype_size(x.params)) + (x.separate_master ? 4 * N : 0) +
         states_real;
}

int64_t plan_data_bytes(const std::string& data_dir) {
  try {
    const DataMeta meta = meta_read(data_dir);
    return static_cast<int64_t>(meta.token_width) * (meta.train.tokens + meta.val.tokens);
  } catch (const Error&) {
    return -1;
  }
}

std::vector<PlanTensor> plan_tensors_from_table(const ParamTable& table, const OptimConfig& optim,
                                                int64_t world) {
  std::vector<PlanTensor> out;
  const std::vector<int> owners = muon_owners(table, optim, static_cast<int>(world));
  const OptimTraits* traits = optim_traits_find(optim.name);
  for (size_t i = 0; i < table.params.size(); ++i) {
    const ParamInfo& p = table.params[i];
    PlanTensor t;
    t.numel = p.numel;
    t.dims = static_cast<int>(p.shape.size());
    t.cols = p.shape.back();
    t.rows = p.numel / t.cols;
    t.embedding = p.kind == ParamKind::kEmbedding;
    t.offset = p.offset;
    t.unit = p.unit;
    t.muon = muon_orthogonalises(p, optim);
    t.primary = traits == nullptr || traits->primary == nullptr || traits->primary(p, optim);
    t.owner = owners[i];
    t.split = p.split;
    out.push_back(t);
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> plan_units_from_table(const ParamTable& table) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const UnitInfo& u : table.units) out.emplace_back(u.offset, u.size);
  return out;
}

PlanInput plan_input_from_config(const RunConfig& cfg, int64_t world, int64_t threads,
                                 int64_t data_bytes, int64_t rank) {
  LLM_REQUIRE(cfg.model.vocab_size > 0,
              "model.vocab_size must be set (or model.vocab_size = 0 with a prepared data.dir)");
  const ParamTable table = param_table_for_run(cfg, static_cast<int>(world));
  const PrecisionPlan pp = precision_plan(cfg);
  PlanInput in;
  in.num_params = table.num_params;
  in.elements = table.total;
  for (const auto& u : table.units) in.largest_unit = std::max(in.largest_unit, u.size);
  in.tensors = plan_tensors_from_table(table, cfg.optim, world);
  in.units = plan_units_from_table(table);
  for (size_t u = 0; u < table.units.size(); ++u)
    if (table.units[u].name == "embed") in.embed_unit = static_cast<int64_t>(u);
  // Frozen tensors: counted apart, and what they change in the model's buffers.
  const ParamTable full = model_table_for_run(cfg, static_cast<int>(world));
  if (param_table_has_frozen(full)) {
    const ParamTable frozen = frozen_table_for_run(cfg);
    in.frozen_params = frozen.num_params;
    in.frozen_elements = frozen.total;
    // The sink for gradients of frozen tensors: its size is the model's (one formula).
    in.frozen_sink = gpt_frozen_sink_elements(full, cfg.model);
    const ParamInfo& wte = full.find("embed.wte");
    // No position table with rotary positions: it counts as frozen as wte.
    const bool wpe_trainable =
        full.index_of("embed.wpe") >= 0 ? full.find("embed.wpe").trainable : wte.trainable;
    // Blocks below the first one with a trained tensor (or adapter), when the embeddings are
    // frozen too.
    if (!wte.trainable && !wpe_trainable) {
      int64_t first = cfg.model.n_layer;
      for (const ParamInfo& p : full.params) {
        if (!p.trainable || p.name.rfind("block.", 0) != 0) continue;
        first = std::min<int64_t>(first, std::stoll(p.name.substr(6)));
      }
      in.shapes.untrained_blocks = first;
      in.shapes.embedding_backward = false;
    }
    // The head's weight: the token embedding, or the untied lm_head (model.tie_embeddings).
    const int head = full.index_of("final.lm_head");
    in.shapes.head_weight_grad =
        head >= 0 ? full.params[static_cast<size_t>(head)].trainable : wte.trainable;
    in.shapes.block_weight_grads = false;
    for (const ParamInfo& p : full.params)
      if (p.trainable && p.kind == ParamKind::kMatrix && p.lora == ParamInfo::Lora::kNone)
        in.shapes.block_weight_grads = true;
  }
  in.shapes.lora_rank = cfg.model.lora.rank;
  in.shapes.lora_dropout = cfg.model.lora.enabled() && cfg.model.lora.dropout > 0.0;
  // Each site's GEMMs have the shapes of one of GPT-2's four layers': q, k and v the qkv
  // projection's (their adapters write the full qkv width, gpt.cpp), the gate the MLP fc's.
  constexpr int kShapeOf[kLoraSites] = {0, 1, 2, 3, 0, 0, 0, 2};
  static_assert(kLoraSites == 8, "kShapeOf: one entry per LoRA site");
  for (int i = 0; i < kLoraSites; ++i)
    if (cfg.model.lora.enabled() && cfg.model.lora.targets_layer(lora_target_name(i))) {
      in.shapes.lora_on[kShapeOf[i]] = true;
      in.shapes.lora_rows = in.shapes.lora_rows || (i == kLoraQ || i == kLoraK || i == kLoraV);
    }
  in.rank = rank;
  in.shapes.n_layer = cfg.model.n_layer;
  in.shapes.n_head = cfg.model.n_head;
  in.shapes.n_embd = cfg.model.n_embd;
  in.shapes.block = cfg.model;
  in.shapes.padded_vocab = cfg.model.padded_vocab();
  in.shapes.seq = cfg.train.seq_len;
  in.params = pp.params;
  in.grads = pp.grads;
  in.separate_master = pp.separate_master;
  in.master_none = pp.master_none;
  in.optim = cfg.optim;
  in.optim.state_dtype = dtype_parse(cfg.precision.state, "precision.state");
  in.world = world;
  in.zero = zero_stage_effective(cfg, static_cast<int>(world));
  in.reshard_after_forward = cfg.dist.reshard_after_forward;
  in.micro_batch = cfg.train.micro_batch;
  in.accum = cfg.train.accum;
  in.gns_buffer = gns_source(cfg, static_cast<int>(world), static_cast<int>(in.zero)) ==
                  GnsSource::kMicroBatches;
  in.recompute = recompute_parse(cfg.model.recompute);
  in.threads = threads;
  in.bf16_matmul = cfg.precision.matmul == "bf16";
  in.cudnn_attention = cfg.precision.attention == "cudnn";
  in.data_bytes = data_bytes;
  if (cfg.optim.offload == "disk") {
    int64_t largest = 0;
    for (const ParamInfo& p : table.params) largest = std::max(largest, p.numel);
    in.offload_staging = offload_staging_bytes(cfg.optim, largest);
  }
  return in;
}

std::string format_bytes(int64_t bytes) {
  char buf[64];
  if (std::llabs(bytes) >= 1000000000LL)
    std::snprintf(buf, sizeof buf, "%.3f GB", static_cast<double>(bytes) / kBytesPerGB);
  else
    std::snprintf(buf, sizeof buf, "%.3f MB", static_cast<double>(bytes) / kBytesPerMB);
  return buf;
}

std::string memory_plan_format(const MemoryPlan& plan) {
  const PlanInput& x = plan.input;
  const bool gb = std::max(plan.per_rank_peak, plan.model_state_bytes) >= 1000000000LL;
  const double unit = gb ? kBytesPerGB : kBytesPerMB;
  const char* u = gb ? "GB" : "MB";
  std::string out;
  char line[256];
  auto emit = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof line, fmt, args...);
    out += line;
  };
  emit(
      "predicted memory ledger (%s = %s bytes) | N = %lld params (%lld flat elements, "
      "padding included) | world %lld, ZeRO %lld\n",
      u, gb ? "1e9" : "1e6", static_cast<long long>(x.num_params),
      static_cast<long long>(x.elements), static_cast<long long>(x.world),
      static_cast<long long>(x.zero));
  if (x.frozen_params > 0)
    emit(
        "trained N = %lld of %lld params (%.4f%%); %lld frozen: weights only, whole on every "
        "rank; gradients, master and optimizer state for the trained ones alone\n",
        static_cast<long long>(x.num_params),
        static_cast<long long>(x.num_params + x.frozen_params),
        100.0 * static_cast<double>(x.num_params) /
            static_cast<double>(x.num_params + x.frozen_params),
        static_cast<long long>(x.frozen_params));
  emit(
      "global batch = world %lld x micro-batch %lld x accumulation %lld = %lld sequences; "
      "activations for %lld sequences of %lld tokens, recompute %s\n",
      static_cast<long long>(x.world), static_cast<long long>(x.micro_batch),
      static_cast<long long>(x.accum), static_cast<long long>(plan.global_batch),
      static_cast<long long>(x.micro_batch), static_cast<long long>(x.shapes.seq),
      recompute_name(x.recompute));
  emit("%-20s %-6s %12s %14s %14s\n", "component", "dtype", "bytes/param",
       (std::string("total ") + u).c_str(), (std::string("per rank ") + u).c_str());
  for (const auto& c : plan.components) {
    char bpp[32] = "-";
    if (c.model_state) std::snprintf(bpp, sizeof bpp, "%.3f", c.bytes_per_param());
    emit("%-20s %-6s %12s %14.3f %14.3f%s%s\n", c.name.c_str(), c.dtype.c_str(), bpp,
         static_cast<double>(c.total_bytes) / unit, static_cast<double>(c.per_rank_bytes) / unit,
         c.sharded ? "  (sharded)" : "",
         c.location == "disk"   ? "  (disk)"
         : c.location == "host" ? "  (host)"
                                : "");
  }
  const double n = static_cast<double>(x.num_params);
  // Per parameter of the whole model (trained and frozen): what fine-tuning costs per weight.
  const double n_all = static_cast<double>(x.num_params + x.frozen_params);
  emit("%-27s %12.3f %14.3f %14.3f\n", "model state", plan.model_state_bytes / n_all,
       plan.model_state_bytes / unit, plan.model_state_per_rank / unit);
  if (plan.model_state_bytes > 0)
    emit("%-27s %12.3f %14.3f   (%.1f%% of model state)\n", "  optimizer (master+states)",
         plan.optimizer_bytes / n_all, plan.optimizer_bytes / unit,
         100.0 * static_cast<double>(plan.optimizer_bytes) /
             static_cast<double>(plan.model_state_bytes));
  emit("%-27s %12s %14s %14.3f%s\n", "predicted peak per rank", "", "", plan.per_rank_peak / unit,
       plan.disk_per_rank > 0 || plan.host_per_rank > 0 ? "  (compute device)" : "");
  if (plan.host_per_rank > 0)
    emit("%-27s %12s %14s %14.3f  (host memory beside the device)\n", "in host memory per rank", "",
         "", plan.host_per_rank / unit);
  if (plan.disk_per_rank > 0)
    emit("%-27s %12s %14s %14.3f  (files under optim.offload_dir)\n", "on disk per rank", "", "",
         plan.disk_per_rank / unit);
  emit("checkpoint: weights only %s (%s), full training state %s (%.2f bytes/param)\n",
       format_bytes(plan.ckpt_weights_bytes).c_str(), dtype_name(x.params),
       format_bytes(plan.ckpt_full_bytes).c_str(), static_cast<double>(plan.ckpt_full_bytes) / n);
  for (const auto& note : plan.notes) out += "note: " + note + "\n";
  return out;
}

nlohmann::json memory_plan_json(const MemoryPlan& plan) {
  const PlanInput& x = plan.input;
  nlohmann::json comps = nlohmann::json::array();
  for (const auto& c : plan.components)
    comps.push_back({{"name", c.name},
                     {"tag", mem_tag_name(c.tag)},
                     {"dtype", c.dtype},
                     {"group", c.group},
                     {"trainable", c.trainable},
                     {"location", c.location},
                     {"model_state", c.model_state},
                     {"sharded", c.sharded},
                     {"bytes_per_param", c.bytes_per_param()},
                     {"total_bytes", c.total_bytes},
                     {"per_rank_bytes", c.per_rank_bytes}});
  const double ms = static_cast<double>(plan.model_state_bytes);
  return {{"num_params", x.num_params},
          {"frozen_params", x.frozen_params},
          {"elements", x.elements},
          {"world", x.world},
          {"zero", x.zero},
          {"micro_batch", x.micro_batch},
          {"accum", x.accum},
          {"seq", x.shapes.seq},
          {"global_batch", plan.global_batch},
          {"recompute", recompute_name(x.recompute)},
          {"optimizer", x.optim.name},
          {"params_dtype", dtype_name(x.params)},
          {"grads_dtype", dtype_name(x.grads)},
          {"state_dtype", dtype_name(x.optim.state_dtype)},
          {"components", comps},
          {"model_state_bytes", plan.model_state_bytes},
          {"model_state_per_rank_bytes", plan.model_state_per_rank},
          {"optimizer_bytes", plan.optimizer_bytes},
          {"optimizer_fraction", ms > 0 ? static_cast<double>(plan.optimizer_bytes) / ms : 0.0},
          {"per_rank_peak_bytes", plan.per_rank_peak},
          {"disk_per_rank_bytes", plan.disk_per_rank},
          {"host_per_rank_bytes", plan.host_per_rank},
          {"offload", x.optim.offload},
          {"checkpoint",
           {{"weights_only_bytes", plan.ckpt_weights_bytes}, {"full_bytes", plan.ckpt_full_bytes}}},
          {"notes", plan.notes}};
}

}  // namespace ledgerlm
