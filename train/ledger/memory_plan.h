// The memory planner's formulas: the predicted ledger of a training configuration, per component
// (dtype, bytes per parameter, total bytes, bytes per rank under ZeRO sharding), activations for
// (B, T, recompute), workspace, communication buffers, data, the predicted per-rank peak and the
// checkpoint sizes.
//
// Everything here is arithmetic on N (parameters), the flat-buffer element count, per-tensor
// shapes and the model's dimensions. Nothing builds a model or an optimizer: the ledger compares
// these predictions with what the tracking allocator measured, so they are derived from the
// configuration alone. The model's own buffers are declared once, as data the planner sums: the
// activation list (model/activation_list.h), the frozen-gradient sink and the batch-id buffer
// (model/gpt.h); which of them exist (recompute mode, the blocks that train, adapters) the
// planner decides from the configuration. "GB" is 1e9 bytes throughout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/activation_list.h"
#include "model/base/dtype.h"
#include "model/base/memory.h"
#include "model/model_config.h"
#include "model/param_table.h"
#include "optim/optim_config.h"
#include "train/config/run_config.h"

namespace ledgerlm {

constexpr double kBytesPerGB = 1e9;
constexpr double kBytesPerMB = 1e6;

// One parameter tensor, as far as per-tensor optimizer state needs it.
struct PlanTensor {
  int64_t numel = 0;
  int64_t rows = 1, cols = 1;  // 2-D view: cols = last dim
  int dims = 1;
  bool embedding = false;
  int64_t offset = 0;  // first element in the flat layout (for per-rank shards)
  int unit = 0;
  // Muon: orthogonalised (its matrix group), the rank that orthogonalises it (from ZeRO stage 1;
  // optim/muon_plan.h) and how many (rows / split, cols) matrices it stacks.
  bool muon = false;
  int owner = -1;
  int split = 1;
  // Of the optimizer's primary kind (OptimTraits::primary: factored, quantized, orthogonalised),
  // which decides the state components it has (StateCovers).
  bool primary = true;
};

// Model dimensions for activations; n_layer == 0 means "unknown" (no activation prediction).
struct PlanShapes {
  int64_t n_layer = 0, n_head = 0, n_embd = 0, padded_vocab = 0, seq = 0;
  // The rest of [model] as the model reads it: the MLP and its width F, the attention and norm
  // variants. Whole, so that a new block variant reaches the planner's activation lists
  // (model/activation_list.h) with no edit here. Its n_layer, n_head and n_embd are replaced by
  // the fields above (which the `memory` command may take from its own flags): model().
  ModelConfig block = {};
  ModelConfig model() const {
    ModelConfig m = block;
    m.n_layer = n_layer;
    m.n_head = n_head;
    m.n_embd = n_embd;
    return m;
  }
  int64_t ffn_width() const { return model().ffn_width(); }
  // Blocks below the lowest one that trains anything get no backward and keep no activations
  // (train.freeze); adapters' scratch (LoRA rank, and the dropped input with lora.dropout).
  int64_t untrained_blocks = 0;
  int64_t lora_rank = 0;
  bool lora_dropout = false;
  // Adapted layers, by shape: the qkv projection (qkv or q, k, v), attn proj, the MLP's (C, F)
  // layers (fc / up, gate) and its proj. lora_rows: q, k or v have their own adapters, whose
  // (qkv, rank) scratch and its non-accumulating weight-gradient product the plan adds.
  bool lora_on[4] = {false, false, false, false};
  bool lora_rows = false;
  // The fused q, k, v projection's width: C + 2 x KV heads x head_dim (3C without grouping).
  int64_t qkv_width() const {
    const int64_t kv = block.n_kv_head > 0 ? block.n_kv_head : n_head;
    return n_head > 0 ? n_embd + 2 * kv * (n_embd / n_head) : 3 * n_embd;
  }
  // Which weight-gradient products run: the tied head's (the token embedding trains), the
  // blocks' linear weights' (any of them trains), the embedding backward (an embedding trains).
  bool head_weight_grad = true, block_weight_grads = true, embedding_backward = true;
  bool known() const { return n_layer > 0 && n_head > 0 && n_embd > 0 && seq > 0; }
};

struct PlanInput {
  int64_t num_params = 0;  // N: real parameters (trained ones when some are frozen)
  // Frozen parameters (train.freeze, [lora]): weights only, in the compute dtype, whole on every
  // rank; their flat elements (one-rank layout); the model's gradient sink for them (elements
  // of the gradient dtype).
  int64_t frozen_params = 0, frozen_elements = 0, frozen_sink = 0;
  int64_t elements = 0;             // flat-buffer elements including alignment/unit padding (>= N)
  int64_t largest_unit = 0;         // elements of the largest sharding unit (0: unknown)
  std::vector<PlanTensor> tensors;  // empty: per-tensor optimizer states are approximated
  // The flat layout's units (offset, size in elements; empty: unknown): with them every rank's
  // shard is exact (ZeRO stage >= 1 divides each unit into `world` pieces), without them the
  // sharded components are total / world.
  std::vector<std::pair<int64_t, int64_t>> units;
  int64_t embed_unit = 0;  // index of the embedding unit in `units`
  int64_t rank = 0;        // the rank whose shard is predicted
  PlanShapes shapes;
  DType params = DType::kF32;  // compute copy
  DType grads = DType::kF32;   // gradient buffer (fp32 when accumulating, see precision_plan)
  bool separate_master = false;
  bool master_none = false;
  OptimConfig optim;
  int64_t world = 1;
  int64_t zero = 0;                   // ZeRO stage 0..3 in effect (0 on one rank)
  bool reshard_after_forward = true;  // ZeRO-3 gather buffers: one unit, or every unit
  int64_t micro_batch = 1, accum = 1;
  Recompute recompute = Recompute::kNone;
  int64_t threads = 1;       // CPU backend threads (per-thread scratch)
  bool bf16_matmul = false;  // precision.matmul = bf16 (packed or rounded GEMM operands)
  // precision.attention = cudnn (resolved): the CUDA backend's bf16 copies and cuDNN workspace.
  bool cudnn_attention = false;
  bool cpu_workspace = true;  // include the CPU backend's scratch buffers
  int64_t data_bytes = -1;    // tokens held in memory by the loader (-1: unknown)
  // optim.offload = disk: the RAM arena the state streams through (offload_staging_bytes).
  int64_t offload_staging = 0;
  // train.gns from each micro-batch (GnsSource::kMicroBatches): a second gradient-sized buffer.
  bool gns_buffer = false;
};

struct PlanComponent {
  std::string name;  // e.g. "params", "optim.m", "optim.codes.m", "workspace.model"
  MemTag tag = MemTag::kOther;
  std::string dtype;         // "bf16", "fp32", "u8", or "-" for mixed
  bool model_state = false;  // params, grads, master, optimizer states
  bool optimizer = false;    // master + optimizer states ("K" bytes per parameter)
  bool sharded = false;      // divided across ranks under the configured ZeRO stage
  // The ledger's schema (ledger.json format_version 2): which optimizer group the bytes belong to
  // ("all": every group together; "-": not model state), whether they serve trainable or frozen
  // parameters ("trainable", "frozen", "-"), and where they live ("device": the compute
  // backend's memory, "host": host memory beside a device backend, "disk": files).
  std::string group = "-";
  std::string trainable = "-";
  std::string location = "device";
  int64_t total_bytes = 0;  // one full copy (model state), or one rank's bytes (the rest)
  int64_t per_rank_bytes = 0;
  double bytes_per_param() const;  // total / N for model state, 0 otherwise
  int64_t num_params = 0;
};

struct MemoryPlan {
  PlanInput input;
  std::vector<PlanComponent> components;
  int64_t model_state_bytes = 0;  // one full copy of params+grads+master+states
  int64_t optimizer_bytes = 0;    // master + optimizer states (full copy)
  int64_t model_state_per_rank = 0;
  int64_t per_rank_peak = 0;       // every component in memory (not on disk) together
  int64_t disk_per_rank = 0;       // components in files (optim.offload = disk)
  int64_t host_per_rank = 0;       // in host memory beside a device (optim.offload = host)
  int64_t global_batch = 0;        // world x micro_batch x accum sequences
  int64_t ckpt_weights_bytes = 0;  // weights only, in the compute dtype
  int64_t ckpt_full_bytes = 0;     // weights + fp32 master + optimizer states
  std::vector<std::string> notes;

  // Per-rank bytes predicted for one tracker tag (sum of its components).
  int64_t per_rank_for_tag(MemTag tag) const;
};

// Bytes per parameter of master + optimizer state ("K"): SGD 4, momentum SGD 8, AdamW 12, ...
// with fp32 state; optim.state_dtype = bf16 halves the parameter-shaped states (AdamW 8).
// (nominal: per-tensor states such as Adafactor's factored statistics count as ~0).
double plan_optimizer_bytes_per_param(const OptimConfig& optim);

// The model's buffers for one micro-batch of `batch` sequences (model/activation_list.h, fp32),
// for the blocks and adapters these shapes say train.
ActivationSpec plan_activation_spec(const PlanShapes& s, int64_t batch, Recompute recompute);
// Activation bytes kept for backward (the sum of saved_activations: each buffer rounded up to 64
// bytes), and the model's scratch for activation gradients (the sum of model_scratch).
int64_t plan_activation_bytes(const PlanShapes& s, int64_t batch, Recompute recompute);
int64_t plan_model_scratch_bytes(const PlanShapes& s, int64_t batch);
// precision.attention = cudnn: what the CUDA backend's cuDNN attention keeps in its workspace
// slots (model/backend/cuda/cudnn_attention.h) for micro-batch `batch`: bf16 copies of qkv,
// out, dout and dqkv, and an estimate of cuDNN's own workspace for the deterministic backward.
int64_t plan_cudnn_attention_bytes(const PlanShapes& s, int64_t batch);
// The CPU backend's persistent scratch (GEMM operand widening or bf16 packing, partial sums,
// per-thread rows) for x.shapes, x.micro_batch, x.elements, x.params, x.grads, x.threads and
// x.bf16_matmul.
int64_t plan_cpu_workspace_bytes(const PlanInput& x);

MemoryPlan memory_plan_compute(const PlanInput& in);
// The full training state's checkpoint bytes of a computed plan (its components and input).
int64_t plan_ckpt_full_bytes(const MemoryPlan& plan);

// Inputs from a run configuration: the parameter table built for `world` ranks (exact layout),
// precision_plan's dtypes, shapes from [model] and [train], the ZeRO stage in effect
// (zero_stage_effective). `data_bytes` as in PlanInput.
PlanInput plan_input_from_config(const RunConfig& config, int64_t world, int64_t threads,
                                 int64_t data_bytes, int64_t rank = 0);
// Bytes the data loader keeps in memory for a prepared directory (both splits' tokens at the
// shard width), from its meta.json; -1 when the directory has no readable meta.json.
int64_t plan_data_bytes(const std::string& data_dir);
// Per-tensor shapes of a parameter table.
std::vector<PlanTensor> plan_tensors_from_table(const ParamTable& table, const OptimConfig& optim,
                                                int64_t world);
// The units (offset, size) of a parameter table.
std::vector<std::pair<int64_t, int64_t>> plan_units_from_table(const ParamTable& table);

// Human table (GB, or MB when the peak is under 1 GB) and JSON.
std::string memory_plan_format(const MemoryPlan& plan);
nlohmann::json memory_plan_json(const MemoryPlan& plan);
// "12.35 GB" / "3.20 MB" with 1e9 / 1e6.
std::string format_bytes(int64_t bytes);

}  // namespace ledgerlm
