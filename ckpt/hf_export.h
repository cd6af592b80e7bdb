// Mapping between ledgerlm's flat parameter layout and Hugging Face GPT-2 tensors.
//
// ledgerlm stores linear weights as (out, in) and pads the token embedding to a multiple of 64
// rows; HF GPT-2 uses Conv1D weights of shape (in, out) (y = x @ W + b) and the real vocab. The
// ParamTable carries, per tensor, the HF name, whether to transpose, and how many rows are real,
// so the mapping here is table-driven and has no per-layer code.
//
// HF GPT-2 ties the LM head to transformer.wte.weight, as ledgerlm does: "lm_head.weight" is
// never written (GPT2LMHeadModel re-ties it on load) and is ignored by params_from_hf_tensors
// (`import`, ckpt/hf_import.h, first checks that a stored one equals wte).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/model_config.h"
#include "model/param_table.h"

namespace ledgerlm {

struct HfTensor {
  std::string name;            // e.g. "transformer.h.0.attn.c_attn.weight"
  std::vector<int64_t> shape;  // HF layout
  std::vector<float> data;     // fp32, row-major
};

// Optional fields of config.json that ledgerlm's ModelConfig does not know.
struct HfConfigExtras {
  int64_t bos_token_id = -1;  // -1: written as null
  int64_t eos_token_id = -1;
};

// HF tensors (fp32) for every parameter of the table, in table order. `params` is a host-memory
// flat buffer of any float dtype (fp32/fp64/bf16/fp16) laid out by `table`.
std::vector<HfTensor> hf_tensors_from_params(const ParamTable& table, Tensor params);

// Inverse: fills the table's tensors in `params` (host memory, any float dtype, rounding to
// nearest) from HF-layout tensors, transposing back and zeroing the padded vocab rows. Every
// table tensor must be present with its HF shape; "lm_head.weight" and HF's attention-mask
// buffers (".attn.bias", ".attn.masked_bias") are skipped; any other name is an Error.
void params_from_hf_tensors(const ParamTable& table, const std::vector<HfTensor>& tensors,
                            Tensor params);

// Writes the tensors as one fp32 safetensors file with metadata {"format": "pt"} (transformers
// refuses safetensors weights without it). Atomic (tmp + rename).
void hf_write_safetensors(const std::string& path, const std::vector<HfTensor>& tensors);
// Reads every tensor of a safetensors file (any float dtype) as fp32 HfTensors.
std::vector<HfTensor> hf_read_safetensors(const std::string& path);

// config.json for GPT2LMHeadModel: sizes from `config`, vocab_size = the real (unpadded) vocab,
// n_positions = n_ctx = block_size, n_inner = the MLP's width (null when it is 4 x n_embd),
// activation gelu_new (GELU tanh approximation), layer norm
// eps 1e-5, tied word embeddings, dropout probabilities from model.dropout.
void hf_write_config_json(const std::string& path, const ModelConfig& config,
                          const HfConfigExtras& extras = {});
// model.norm: an Error naming the key unless `config`'s norms and biases are GPT-2's
// (LayerNorm with weight and bias, eps 1e-5, every bias), which GPT2LMHeadModel can hold.
void hf_require_gpt2_block(const ModelConfig& config);
// The text hf_write_config_json writes (hf_import.h reads it back to the same ModelConfig).
std::string hf_config_json_text(const ModelConfig& config, const HfConfigExtras& extras = {});
// Refuses (one line naming the key) a model Hugging Face GPT-2 cannot hold: a SwiGLU or ReLU^2
// MLP (model.mlp), a logit soft-cap, rotary positions, grouped-query attention or QK-norm. An
// untied head it holds (tie_word_embeddings = false).
void hf_require_gpt2_block(const ModelConfig& config);

}  // namespace ledgerlm
