// A LoRA run's adapters in the layout of Hugging Face PEFT (adapter_model.safetensors +
// adapter_config.json), to load on top of the base GPT-2 with PeftModel.from_pretrained.
//
// PEFT keeps, for a GPT-2 Conv1D layer NAME (e.g. transformer.h.0.attn.c_attn), the tensors
// "base_model.model.NAME.lora_A.weight" (r, in) and "base_model.model.NAME.lora_B.weight"
// (out, r): the same shapes as ledgerlm's A and B, so the factors travel untransposed
// (fan_in_fan_out = true concerns only the base weight, which Conv1D stores (in, out)).
#pragma once

#include <string>
#include <vector>

#include "ckpt/hf_export.h"
#include "model/model_config.h"
#include "model/param_table.h"

namespace ledgerlm {

// GPT-2's Conv1D modules are whole weights: PEFT has no adapter on a row block of the fused
// c_attn, so lora.targets q, k or v (their own adapters) are refused naming the target.
void peft_require_gpt2_targets(const ModelConfig& config);

// PEFT's name of adapter factor `p` of `table` (ParamInfo::lora != kNone).
std::string peft_tensor_name(const ParamTable& table, const ParamInfo& p);

// adapter_config.json: LORA on the targeted Conv1D modules (config.lora.targets, named by the
// block recipe; see peft_require_gpt2_targets), r, lora_alpha, lora_dropout,
// fan_in_fan_out, no trained biases, task CAUSAL_LM; `base` is base_model_name_or_path, the
// model the adapters go on (what AutoPeftModelForCausalLM.from_pretrained loads first; export
// --lora-only chooses it: export_command.cpp, peft_base_path).
std::string peft_adapter_config_json(const ModelConfig& config, const std::string& base);

}  // namespace ledgerlm
