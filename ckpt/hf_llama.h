// Hugging Face LlamaForCausalLM and Qwen2ForCausalLM in and out: `import --format hf` of their
// directories and `export --format hf` of a run whose blocks are theirs.
//
// What ledgerlm represents of them (model.norm = rmsnorm with weights, model.mlp = swiglu,
// model.position = rope in their half-split convention, model.n_kv_head for grouped-query
// attention, no QK-norm, no soft-cap): the config.json keys map to [model] keys through one
// table (hf_llama.cpp, kKeys), read by the import and written by the export; the tensors map to
// the block recipe's roles through one table (hf_llama.cpp, block_parts), which stacks q_proj,
// k_proj and v_proj as the rows of ledgerlm's fused qkv. Anything else a config.json asks for
// (rope_scaling, a sliding window, experts, another activation, an unknown key) is refused in
// one line naming the key.
//
// Memory: the import streams the weights tensor by tensor, shard by shard (a single
// model.safetensors or the shards model.safetensors.index.json lists): at most the fp32 model
// plus one tensor (as stored and widened to fp32) is held at once.
#pragma once

#include <string>
#include <vector>

#include "ckpt/hf_export.h"
#include "model/backend/backend.h"
#include "model/model_config.h"
#include "model/param_table.h"

namespace ledgerlm {

// Whether config.json's model_type is one of these families ("llama", "qwen2").
bool hf_llama_model_type(const std::string& model_type);

// The ModelConfig of a LlamaForCausalLM / Qwen2ForCausalLM config.json; `origin` names it in
// errors. Refuses in one line, naming the key, what ledgerlm cannot compute the same way.
ModelConfig hf_llama_config_from_json(const std::string& text, const std::string& origin,
                                      std::vector<std::string>* notes);

// The weight files of model directory `dir`: model.safetensors, or the shards that
// model.safetensors.index.json lists (each once, in name order; each must exist).
std::vector<std::string> hf_llama_weight_files(const std::string& dir);

// Streams the tensors of `files` into `params` (host fp32, laid out by `table`, built from
// `config`): every parameter once with its HF shape, any float dtype, every value finite; a tied
// lm_head.weight stored anyway must equal embed_tokens; the rotary inverse-frequency buffers are
// skipped; anything else is refused naming the file and the tensor. Padded vocab rows are zero.
void hf_llama_load_params(const ModelConfig& config, const ParamTable& table,
                          const std::vector<std::string>& files, Tensor params);

// Whether `config` is for the Llama export (rotary positions): the export writes
// LlamaForCausalLM / Qwen2ForCausalLM for it, GPT2LMHeadModel otherwise.
bool hf_llama_export_family(const ModelConfig& config);
// Refuses (one line naming the [model] key) what neither class can hold.
void hf_llama_require_exportable(const ModelConfig& config);
// "Qwen2ForCausalLM" for q/k/v biases only (model.qkv_bias without model.bias), else
// "LlamaForCausalLM".
const char* hf_llama_architecture(const ModelConfig& config);
// config.json of that class: every key of the mapping table, fp32.
std::string hf_llama_config_json_text(const ModelConfig& config, const HfConfigExtras& extras);
// The HF tensors (fp32, q/k/v split out of the fused qkv) of `params` (host fp32).
std::vector<HfTensor> hf_llama_tensors_from_params(const ModelConfig& config,
                                                   const ParamTable& table, Tensor params);

// The LoRA factors of `table` (a LoRA run's, host fp32 `params`) as a PEFT adapter for these
// classes: each adapter is written for the HF modules whose rows it covers. One over a linear
// layer stored as several HF modules (lora.targets qkv on the fused q, k, v) is exactly one
// adapter per module, A shared and B cut into the modules' rows; q, k and v's own adapters
// (lora.targets q, k, v) each cover one module and are written as they are
// ("base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight", ...).
std::vector<HfTensor> hf_llama_peft_tensors(const ModelConfig& config, const ParamTable& table,
                                            const std::vector<HfTensor>& factors);
// The PEFT target_modules of config.lora.targets ("q_proj", "k_proj", "v_proj", "o_proj",
// "gate_proj", ...), in the order of the modules in a layer.
std::vector<std::string> hf_llama_peft_modules(const ModelConfig& config);

}  // namespace ledgerlm
