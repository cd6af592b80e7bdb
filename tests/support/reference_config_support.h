// Shared by the tests that run tests/reference/gpt_ref.py: the config.json it reads.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/hf_export.h"
#include "model/model_config.h"
#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// The reference's config.json: the HF export's, plus the keys gpt_ref.py reads for the block
// variants HF GPT-2 cannot express (the export refuses them): ledgerlm_mlp,
// ledgerlm_logit_softcap, ledgerlm_position, rope_theta, n_kv_head, qk_norm, qk_norm_eps, norm,
// norm_weight, bias, qkv_bias (and the norms' eps as layer_norm_epsilon).
inline void write_reference_config(const std::string& path, const ModelConfig& cfg) {
  ModelConfig twin = cfg;
  twin.mlp = "gelu";
  twin.ffn_hidden = cfg.ffn_width();
  twin.logit_softcap = 0.0;
  twin.position = "learned";
  twin.n_kv_head = 0;
  twin.qk_norm = false;
  twin.norm = "layernorm";
  twin.norm_weight = true;
  twin.norm_eps = 1e-5;
  twin.bias = true;
  twin.qkv_bias = false;
  twin.lora = LoraConfig();
  nlohmann::json j = nlohmann::json::parse(hf_config_json_text(twin));
  j["ledgerlm_mlp"] = cfg.mlp;
  j["ledgerlm_logit_softcap"] = cfg.logit_softcap;
  j["ledgerlm_position"] = cfg.position;
  j["rope_theta"] = cfg.rope_theta;
  j["n_kv_head"] = cfg.kv_heads();
  j["qk_norm"] = cfg.qk_norm;
  j["qk_norm_eps"] = kQkNormEps;
  j["norm"] = cfg.norm;
  j["norm_weight"] = cfg.norm_weight;
  j["layer_norm_epsilon"] = cfg.norm_eps;
  j["bias"] = cfg.bias;
  j["qkv_bias"] = cfg.qkv_bias;
  write_file(path, j.dump(2));
}

}  // namespace ledgerlm::testing
