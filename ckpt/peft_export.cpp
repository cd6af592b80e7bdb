// PEFT adapter export (see peft_export.h).
#include "ckpt/peft_export.h"

#include <nlohmann/json.hpp>

#include "ckpt/hf_llama.h"
#include "model/base/check.h"
#include "model/block_recipe.h"

namespace ledgerlm {

void peft_require_gpt2_targets(const ModelConfig& config) {
  const BlockRecipe recipe = block_recipe(config);
  for (int site = 0; site < kLoraSites; ++site)
    LLM_REQUIRE(
        !config.lora.targets_layer(lora_target_name(site)) || recipe.lora_sites[site].whole(),
        "export --lora-only: lora.targets '", lora_target_name(site),
        "' adapts a row block of GPT-2's fused attn.c_attn, which a PEFT adapter cannot "
        "target on its own (expected qkv for a GPT-2 model)");
}

std::string peft_tensor_name(const ParamTable& table, const ParamInfo& p) {
  LLM_REQUIRE(p.lora != ParamInfo::Lora::kNone, "peft export: '", p.name, "' is no adapter factor");
  // The adapted weight's HF name: "<stem>.weight" of "<stem>.lora_a" / "<stem>.lora_b".
  const std::string stem = p.name.substr(0, p.name.size() - std::string(".lora_a").size());
  const std::string layer = table.find(stem + ".weight").hf_name;  // "...attn.c_attn.weight"
  const std::string module = layer.substr(0, layer.size() - std::string(".weight").size());
  return "base_model.model." + module +
         (p.lora == ParamInfo::Lora::kA ? ".lora_A.weight" : ".lora_B.weight");
}

std::string peft_adapter_config_json(const ModelConfig& config, const std::string& base) {
  const LoraConfig& lora = config.lora;
  // ledgerlm's targets as PEFT module-name suffixes (matched as "...h.N.<suffix>"), in the
  // recipe's site order.
  const BlockRecipe recipe = block_recipe(config);
  nlohmann::json targets = nlohmann::json::array();
  const bool llama = hf_llama_export_family(config);
  if (llama) {  // nn.Linear modules, (out, in) like ledgerlm's: q_proj, k_proj, ...
    for (const std::string& m : hf_llama_peft_modules(config)) targets.push_back(m);
  } else {
    peft_require_gpt2_targets(config);
    for (int site = 0; site < kLoraSites; ++site) {
      if (!lora.targets_layer(lora_target_name(site))) continue;
      targets.push_back(
          recipe_hf_module(recipe.block[static_cast<size_t>(recipe.lora_sites[site].role)]));
    }
  }
  const nlohmann::json j = {{"peft_type", "LORA"},
                            {"task_type", "CAUSAL_LM"},
                            {"base_model_name_or_path", base},
                            {"r", lora.rank},
                            {"lora_alpha", lora.alpha},
                            {"lora_dropout", lora.dropout},
                            {"target_modules", targets},
                            // GPT-2's Conv1D stores its weight (in, out); nn.Linear (out, in).
                            {"fan_in_fan_out", !llama},
                            {"bias", "none"},
                            {"inference_mode", true},
                            {"use_rslora", false},
                            {"init_lora_weights", true},
                            {"modules_to_save", nullptr}};
  return j.dump(2) + "\n";
}

}  // namespace ledgerlm
