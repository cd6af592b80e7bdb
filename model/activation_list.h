// The model's activation buffers as data: which tensors the forward keeps for backward (and the
// scratch its backward works in), with their sizes, for a model, a micro-batch and a recompute
// mode. GptModel carves its arena and its scratch from these lists and nothing else; the memory
// planner (train/ledger/memory_plan.cpp) sums the same lists, so a new activation is declared
// here once and both follow. The planner stays an independent prediction of the allocator all
// the same: it decides which blocks train, the dtypes and the batch from the run configuration,
// not from a built model, and the ledger checks its sum against the bytes the model allocated.
//
// What decides the set: the shapes (L, H, C, the qkv width, F, padded vocab), the micro-batch (B,
// T), the recompute mode, the blocks that get no backward, the activations' dtype and, for the
// scratch only, the adapters (LoRA rank and input dropout). Dropout keeps nothing (its masks are
// pure functions of their key and are drawn again in backward), and the attention kernel keeps
// nothing in the arena either: cuDNN's bf16 copies live in the CUDA backend's workspace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/base/dtype.h"
#include "model/model_config.h"

namespace ledgerlm {

// Everything the lists depend on.
struct ActivationSpec {
  int64_t n_layer = 0, n_head = 0, n_embd = 0, padded_vocab = 0;
  // The block's widths: the fused q, k, v projection's output and the MLP's hidden width F.
  int64_t qkv = 0, ffn = 0;
  int64_t batch = 0, seq = 0;
  Recompute recompute = Recompute::kNone;
  // Blocks below the lowest one that trains anything run forward only: they keep nothing for
  // backward and share one set of buffers, as recomputed blocks do.
  int64_t untrained_blocks = 0;
  DType dtype = DType::kF32;  // the activations' dtype (fp64 in the gradient checks)
  // Adapters' scratch: their rank (0: none) and whether their input is dropped (lora.dropout).
  int64_t lora_rank = 0;
  bool lora_dropout = false;
  // lora.targets names q, k or v: their adapters' (qkv, rank) scratch (gpt.cpp).
  bool lora_rows = false;
  // The MLP (model.mlp): SwiGLU keeps its gate projection's output besides fc's and the product.
  MlpKind mlp = MlpKind::kGelu;
  // model.qk_norm: the heads normalised per row (H + KV), whose rstd the backward keeps; 0: off.
  int64_t qk_norm_heads = 0;
  // model.norm = rmsnorm: the norms keep no mean (ln1_mean, ln2_mean, lnf_mean).
  bool rms_norm = false;
};

// The spec of a model configuration (shapes from [model], the qkv and MLP widths from its block
// recipe, block_widths), adapters included.
ActivationSpec activation_spec(const ModelConfig& config, int64_t batch, int64_t seq,
                               Recompute recompute, int64_t untrained_blocks, DType dtype);

// One named buffer of the lists. The model binds each id to its tensor.
enum class ActId : uint8_t {
  // Saved for backward: the residual stream entering each block and leaving the last one,
  kResidual,
  // per block (inputs of the block's backward),
  kLn1,
  kLn1Mean,
  kLn1Rstd,
  kQkv,
  kAtty,
  kLse,
  kRes2,
  kLn2,
  kLn2Mean,
  kLn2Rstd,
  kFch,
  kFchGelu,
  // and the head.
  kLnf,
  kLnfMean,
  kLnfRstd,
  kLogits,
  kLosses,
  // Scratch: activation gradients and temporaries of one block at a time.
  kDRes,
  kDA,
  kDB,
  kDWideA,
  kDWideB,
  kDQkv,
  kTmpProj,
  kLoraU,
  kLoraDu,
  kLoraX,
  // q, k and v's adapters: B placed in its rows of a zero (qkv, rank) matrix, and its gradient.
  kLoraRowsB,
  // model.mlp = swiglu: the gate projection's output, per block (kept and recomputed as kFch).
  kFchGate,
  // model.qk_norm: per block, the rstd of each q and k head.
  kQkRstd,
};

enum class ActScope : uint8_t {
  kGlobal,    // one buffer
  kResidual,  // one per block boundary: n_layer + 1
  kBlock,     // one per block that keeps its own, and one shared by the blocks that do not
};

struct ActBuffer {
  ActId id = ActId::kResidual;
  std::string name;  // "residual", "block.qkv", "head.logits", "scratch.d_res", ...
  ActScope scope = ActScope::kGlobal;
  int64_t elements = 0;  // one buffer
  DType dtype = DType::kF32;
  // kBlock: blocks first_kept.. keep their own buffer; blocks below it (recomputed, or without a
  // backward) use the one shared buffer, which exists when first_kept > 0.
  int64_t first_kept = 0;
  bool shared = false;
  int64_t count = 1;  // buffers of this name the allocation holds

  // One buffer as carved: elements * dtype size, rounded up to 64 bytes.
  int64_t bytes() const;
  int64_t total_bytes() const { return count * bytes(); }
};

// The activations kept for backward, in the arena's order: the residual stream, the block's
// buffers (carved block by block, in this order within a block), the head's.
std::vector<ActBuffer> saved_activations(const ActivationSpec& spec);
// The scratch of the backward (and the forward's projection temporary), in carving order.
std::vector<ActBuffer> model_scratch(const ActivationSpec& spec);
// Sum of total_bytes() over a list.
int64_t act_list_bytes(const std::vector<ActBuffer>& list);
const char* act_name(ActId id);

}  // namespace ledgerlm
