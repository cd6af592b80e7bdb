// Reading a Hugging Face GPT2LMHeadModel directory (config.json + model.safetensors) as a
// ledgerlm model: the inverse of hf_export.h, for `ledgerlm import --format hf`. A directory whose
// config.json has model_type llama or qwen2 is read by ckpt/hf_llama.h instead (dispatched here).
//
// Of the GPT-2 family ledgerlm represents exactly one member: pre-LayerNorm blocks with
// eps = kLayerNormEps, GELU's tanh approximation, an MLP of any width (n_inner), attention scaled
// by 1/sqrt(head_dim) and nothing else, and an LM head tied to the token embedding. A config or a
// weights file that asks for anything else is refused with one line naming the key or tensor and
// what was expected, rather than imported into a model that would compute something different.
//
// Dropout: ledgerlm has one probability, model.dropout, applied where GPT-2 applies embd_pdrop,
// attn_pdrop and resid_pdrop. When the three agree it is that value; when they differ it is
// resid_pdrop and the import says so (dropout only matters when training, where
// --model.dropout sets it anyway).
#pragma once

#include <string>
#include <vector>

#include "ckpt/hf_export.h"
#include "model/backend/backend.h"
#include "model/model_config.h"
#include "model/param_table.h"

namespace ledgerlm {

struct HfModel {
  ModelConfig config;  // vocab_size is the real (unpadded) vocab; padded_vocab() pads it
  // Every parameter tensor in HF layout under its full name ("transformer.h.0.ln_1.weight"),
  // whatever prefix the file used; "lm_head.weight" (checked to equal wte) and the attention
  // mask buffers are not kept. Ready for params_from_hf_tensors.
  std::vector<HfTensor> tensors;
  std::vector<std::string> notes;  // lines worth telling the user (dropout that was merged)
  std::string weights_path;        // DIR/model.safetensors, for messages
  // LlamaForCausalLM / Qwen2ForCausalLM (ckpt/hf_llama.h): `tensors` stays empty and
  // hf_model_to_params streams the weights from these files (model.safetensors or its shards).
  bool llama = false;
  std::vector<std::string> weight_files;
};

// The ModelConfig a GPT-2 config.json describes; `origin` names it in errors. Keys absent from
// the text take GPT2Config's defaults, except the sizes (vocab_size, n_positions, n_embd,
// n_layer, n_head) and model_type, which must be present.
ModelConfig hf_config_from_json(const std::string& text, const std::string& origin,
                                std::vector<std::string>* notes);

// Reads DIR/config.json and, for GPT-2, DIR/model.safetensors (tensors of any float dtype, widened
// to fp32) and checks the tensors against the config: names with or without the "transformer."
// prefix, every parameter present once with its shape, nothing else but the mask buffers and a tied
// lm_head, every value finite (a NaN or infinity is refused naming the tensor and its first bad
// element). A directory with pytorch_model.bin but no model.safetensors is refused with how to
// convert it. For model_type llama or qwen2 it reads the config and finds the weight files
// (hf_llama.h); their tensors are read by hf_model_to_params.
HfModel hf_read_model_dir(const std::string& dir);

// Fills `params` (host memory, laid out by `table`, built from model.config) from the model's
// tensors: params_from_hf_tensors, its errors naming the weights file.
void hf_model_to_params(const HfModel& model, const ParamTable& table, Tensor params);

}  // namespace ledgerlm
