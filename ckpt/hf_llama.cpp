// Hugging Face Llama and Qwen2 in and out (see hf_llama.h).
#include "ckpt/hf_llama.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <variant>

#include <nlohmann/json.hpp>

#include "ckpt/finite_weights.h"
#include "ckpt/safetensors.h"
#include "model/base/check.h"
#include "model/base/input_file.h"
#include "model/block_recipe.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// ---- config.json <-> [model]: the mapping, once ----

// A config.json key that is one [model] key, read by the import and written by the export.
// `required`: the import refuses a config.json without it (otherwise the [model] default stays,
// which is the transformers default of that key).
struct MappedKey {
  const char* hf;
  std::variant<int64_t ModelConfig::*, double ModelConfig::*, bool ModelConfig::*> field;
  bool required;
};
const MappedKey kKeys[] = {
    {"vocab_size", &ModelConfig::vocab_size, true},
    {"hidden_size", &ModelConfig::n_embd, true},
    {"intermediate_size", &ModelConfig::ffn_hidden, true},
    {"num_hidden_layers", &ModelConfig::n_layer, true},
    {"num_attention_heads", &ModelConfig::n_head, true},
    {"num_key_value_heads", &ModelConfig::n_kv_head, false},  // absent: n_head (no GQA)
    {"max_position_embeddings", &ModelConfig::block_size, true},
    {"rms_norm_eps", &ModelConfig::norm_eps, false},
    {"rope_theta", &ModelConfig::rope_theta, false},
    {"tie_word_embeddings", &ModelConfig::tie_embeddings, false},
};

// Keys whose only accepted value is the one ledgerlm computes (absent or null is accepted too);
// the export writes them with that value.
struct FixedKey {
  const char* hf;
  const char* value;  // JSON text
  const char* why;
};
const FixedKey kFixed[] = {
    {"hidden_act", "\"silu\"", "the gated MLP's activation is SiLU (model.mlp = swiglu)"},
    {"pretraining_tp", "1", "tensor-parallel slicing of the projections is not computed"},
    {"use_sliding_window", "false", "attention is full-context, no sliding window"},
    {"rope_scaling", "null", "rotary positions are unscaled (rope_type default)"},
    {"rope_interleaved", "false",
     "rotary pairs are Hugging Face's half-split ones (i, i + head_dim/2)"},
    {"use_mrope", "false", "rotary positions are one-dimensional"},
};

// Keys that do not change the function transformers computes (metadata, generation, init) or
// that the import checks on their own (below); any key not in a table is refused.
const char* const kIgnored[] = {
    "architectures",
    "model_type",
    "_name_or_path",
    "torch_dtype",
    "dtype",
    "transformers_version",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "initializer_range",
    "use_cache",
    "is_llama_config",
    "attention_dropout",  // training only: imported as model.dropout = 0, with a note unless 0
    "transformers.js_config",
    "max_window_layers",
    "sliding_window",
    "layer_types",
    "head_dim",
    "attention_bias",
    "mlp_bias",
    "rope_parameters",
    "output_attentions",
    "output_hidden_states",
    "return_dict",
    "tie_encoder_decoder",
    "chunk_size_feed_forward",
    "is_encoder_decoder",
    "id2label",
    "label2id",
    "problem_type",
    "tokenizer_class",
    "task_specific_params",
    "prefix",
    "decoder_start_token_id",
    "sep_token_id",
    "finetuning_task",
    "quantization_config",
};

// Mixture-of-experts keys: the model is not a dense one ledgerlm can hold.
const char* const kMoe[] = {"num_experts",
                            "num_local_experts",
                            "num_experts_per_tok",
                            "moe_intermediate_size",
                            "shared_expert_intermediate_size",
                            "decoder_sparse_step",
                            "router_aux_loss_coef",
                            "output_router_logits",
                            "n_routed_experts",
                            "n_shared_experts"};

struct Family {
  const char* model_type;
  const char* architecture;
};
const Family kFamilies[] = {{"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}};

const Family* family_of(const std::string& model_type) {
  for (const Family& f : kFamilies)
    if (model_type == f.model_type) return &f;
  return nullptr;
}

bool present(const json& j, const char* key) {
  return j.contains(key) && !j.at(key).is_null();
}

std::string read_text(const std::string& path, const char* what) {
  const int fd = input_file_open(path, what);
  LLM_REQUIRE(fd >= 0, "import: cannot read '", path, "' (", errno_text(), ")");
  return input_file_read_fd(fd, path, what);
}

void read_mapped(const json& j, const MappedKey& k, const std::string& origin, ModelConfig* m) {
  if (!present(j, k.hf)) {
    LLM_REQUIRE(!k.required, origin, ": no '", k.hf, "' (a ", "Llama/Qwen2 config.json has it)");
    return;
  }
  const json& v = j.at(k.hf);
  if (auto* i = std::get_if<int64_t ModelConfig::*>(&k.field)) {
    LLM_REQUIRE(v.is_number_integer() && v.get<int64_t>() > 0, origin, ": ", k.hf, " is ", v.dump(),
                ", expected a positive integer");
    m->** i = v.get<int64_t>();
  } else if (auto* d = std::get_if<double ModelConfig::*>(&k.field)) {
    LLM_REQUIRE(v.is_number() && v.get<double>() > 0, origin, ": ", k.hf, " is ", v.dump(),
                ", expected a positive number");
    m->** d = v.get<double>();
  } else {
    LLM_REQUIRE(v.is_boolean(), origin, ": ", k.hf, " is ", v.dump(), ", expected true or false");
    m->**std::get_if<bool ModelConfig::*>(&k.field) = v.get<bool>();
  }
}

json mapped_value(const MappedKey& k, const ModelConfig& m) {
  if (auto* i = std::get_if<int64_t ModelConfig::*>(&k.field)) return m.**i;
  if (auto* d = std::get_if<double ModelConfig::*>(&k.field)) return m.**d;
  return m.**std::get_if<bool ModelConfig::*>(&k.field);
}

bool optional_bool(const json& j, const char* key, const std::string& origin) {
  if (!present(j, key)) return false;
  LLM_REQUIRE(j.at(key).is_boolean(), origin, ": ", key, " is ", j.at(key).dump(),
              ", expected true or false");
  return j.at(key).get<bool>();
}

// ---- tensors: the recipe's roles as Llama / Qwen2 tensors, once ----

// Rows of one HF tensor, in the model's sizes.
enum class Rows : uint8_t { kC, kKv, kF, kVocab, kAll };
struct HfPart {
  const char* name;  // under "model.layers.L." for block roles
  Rows rows;         // kAll: every row of the role (the weight and bias of a linear layer)
};
// The HF tensors whose rows, stacked in this order, make a block role (BlockRole order): the fused
// q, k, v is q_proj's C rows, then k_proj's and v_proj's KV heads x head_dim each. Linear weights
// are (out, in) on both sides: nothing is transposed. No parts: no such tensor in these models
// (LayerNorm's bias).
struct RoleParts {
  int role;
  std::vector<HfPart> parts;
};
const std::vector<RoleParts>& block_parts() {
  static const std::vector<RoleParts> table = {
      {kRoleLn1Weight, {{"input_layernorm.weight", Rows::kAll}}},
      {kRoleQkvWeight,
       {{"self_attn.q_proj.weight", Rows::kC},
        {"self_attn.k_proj.weight", Rows::kKv},
        {"self_attn.v_proj.weight", Rows::kKv}}},
      {kRoleQkvBias,
       {{"self_attn.q_proj.bias", Rows::kC},
        {"self_attn.k_proj.bias", Rows::kKv},
        {"self_attn.v_proj.bias", Rows::kKv}}},
      {kRoleAttnProjWeight, {{"self_attn.o_proj.weight", Rows::kAll}}},
      {kRoleAttnProjBias, {{"self_attn.o_proj.bias", Rows::kAll}}},
      {kRoleLn2Weight, {{"post_attention_layernorm.weight", Rows::kAll}}},
      {kRoleFcWeight, {{"mlp.up_proj.weight", Rows::kAll}}},
      {kRoleFcBias, {{"mlp.up_proj.bias", Rows::kAll}}},
      {kRoleFcProjWeight, {{"mlp.down_proj.weight", Rows::kAll}}},
      {kRoleFcProjBias, {{"mlp.down_proj.bias", Rows::kAll}}},
      {kRoleFcGateWeight, {{"mlp.gate_proj.weight", Rows::kAll}}},
      {kRoleFcGateBias, {{"mlp.gate_proj.bias", Rows::kAll}}},
  };
  return table;
}
// The embedding unit's and the final unit's (EmbedRole, FinalRole order).
const std::vector<RoleParts>& embed_parts() {
  static const std::vector<RoleParts> table = {
      {kRoleWte, {{"model.embed_tokens.weight", Rows::kVocab}}}};
  return table;
}
const std::vector<RoleParts>& final_parts() {
  static const std::vector<RoleParts> table = {
      {kRoleLnfWeight, {{"model.norm.weight", Rows::kAll}}},
      {kRoleLmHead, {{"lm_head.weight", Rows::kVocab}}}};
  return table;
}

// Where one HF tensor goes in the flat parameters: `rows` x `cols` from row `row0` of table row
// `param`.
struct Place {
  std::string hf;
  int param = -1;
  int64_t row0 = 0, rows = 0, cols = 0;
  bool vector = false;  // a 1-D tensor (norm weight, bias): HF shape (rows)
  std::vector<int64_t> hf_shape() const {
    return vector ? std::vector<int64_t>{rows} : std::vector<int64_t>{rows, cols};
  }
};

std::vector<Place> places(const ModelConfig& config, const ParamTable& table) {
  const BlockRecipe recipe = block_recipe(config);
  const RecipeSizes& s = recipe.sizes;
  std::vector<Place> out;
  auto add_unit = [&](const std::vector<TensorRole>& roles, const std::vector<RoleParts>& parts,
                      const std::function<std::string(const TensorRole&)>& table_name,
                      const std::string& prefix) {
    for (size_t i = 0; i < roles.size(); ++i) {
      const TensorRole& role = roles[i];
      if (!role.present) continue;
      const auto it = std::find_if(parts.begin(), parts.end(), [&](const RoleParts& p) {
        return p.role == static_cast<int>(i);
      });
      const std::string name = table_name(role);
      LLM_REQUIRE(it != parts.end(), "hf: ", name,
                  " has no tensor in Hugging Face LlamaForCausalLM / Qwen2ForCausalLM");
      const int index = table.index_of(name);
      LLM_ASSERT(index >= 0, name);
      const ParamInfo& p = table.params[static_cast<size_t>(index)];
      const int64_t cols = p.shape.size() >= 2 ? p.numel / p.shape[0] : 1;
      int64_t row = 0;
      for (const HfPart& part : it->parts) {
        const int64_t rows = part.rows == Rows::kC       ? s.C
                             : part.rows == Rows::kKv    ? s.KV * s.head_dim
                             : part.rows == Rows::kF     ? s.F
                             : part.rows == Rows::kVocab ? s.vocab  // the real rows: no padding
                                                         : p.shape[0];
        out.push_back({prefix + part.name, index, row, rows, cols, p.shape.size() == 1});
        row += rows;
      }
      LLM_ASSERT(row <= p.shape[0], name);
    }
  };
  add_unit(recipe.embed, embed_parts(), recipe_embed_name, "");
  for (int64_t l = 0; l < config.n_layer; ++l)
    add_unit(
        recipe.block, block_parts(), [l](const TensorRole& r) { return recipe_block_name(r, l); },
        "model.layers." + std::to_string(l) + ".");
  add_unit(recipe.final, final_parts(), recipe_final_name, "");
  return out;
}

bool is_rotary_buffer(const std::string& name) {
  const std::string s = "rotary_emb.inv_freq";
  return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
}

}  // namespace

bool hf_llama_model_type(const std::string& model_type) {
  return family_of(model_type) != nullptr;
}

ModelConfig hf_llama_config_from_json(const std::string& text, const std::string& origin,
                                      std::vector<std::string>* notes) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  LLM_REQUIRE(!j.is_discarded() && j.is_object(), origin, ": not a JSON object");
  const std::string type = j.value("model_type", "");
  const Family* family = family_of(type);
  LLM_REQUIRE(family != nullptr, origin, ": model_type is \"", type,
              "\", expected \"llama\" or \"qwen2\"");
  if (present(j, "architectures")) {
    const json& a = j.at("architectures");
    LLM_REQUIRE(a.is_array() && a.size() == 1 && a[0] == family->architecture, origin,
                ": architectures is ", a.dump(), ", expected [\"", family->architecture,
                "\"] (ledgerlm imports causal language models)");
  }
  for (const char* key : kMoe)
    LLM_REQUIRE(!present(j, key), origin, ": ", key,
                " is set: a mixture-of-experts model, ledgerlm's MLP is one dense SwiGLU");
  for (const FixedKey& k : kFixed)
    if (present(j, k.hf)) {
      const json want = json::parse(k.value);
      const json& got = j.at(k.hf);
      const bool same = want.is_number()
                            ? got.is_number() && got.get<double>() == want.get<double>()
                            : got == want;
      LLM_REQUIRE(same, origin, ": ", k.hf, " is ", got.dump(), ", expected ", k.value, " (", k.why,
                  ")");
    }
  for (const auto& item : j.items()) {
    // Named, not structured bindings: clang (the fuzz build) refuses a lambda capturing those.
    const std::string& key = item.key();
    const json& value = item.value();
    const bool known = std::any_of(std::begin(kKeys), std::end(kKeys),
                                   [&](const MappedKey& k) { return key == k.hf; }) ||
                       std::any_of(std::begin(kFixed), std::end(kFixed),
                                   [&](const FixedKey& k) { return key == k.hf; }) ||
                       std::any_of(std::begin(kIgnored), std::end(kIgnored),
                                   [&](const char* k) { return key == k; });
    LLM_REQUIRE(known, origin, ": unsupported key '", key, "' (", value.dump(),
                "): ledgerlm cannot tell whether it changes the model");
  }

  ModelConfig m;
  m.norm = "rmsnorm";
  m.norm_weight = true;
  m.mlp = "swiglu";
  m.position = "rope";
  m.dropout = 0.0;
  m.qk_norm = false;
  m.norm_eps = 1e-6;         // LlamaConfig's and Qwen2Config's default rms_norm_eps
  m.tie_embeddings = false;  // LlamaConfig's default; Qwen2Config's is false too
  for (const MappedKey& k : kKeys) read_mapped(j, k, origin, &m);

  // transformers 5 writes the rotary settings as rope_parameters {rope_type, rope_theta}.
  if (present(j, "rope_parameters")) {
    const json& rp = j.at("rope_parameters");
    LLM_REQUIRE(rp.is_object(), origin, ": rope_parameters is ", rp.dump(), ", expected an object");
    for (const auto& [key, value] : rp.items()) {
      if (key == "rope_type") {
        LLM_REQUIRE(value == "default", origin, ": rope_parameters.rope_type is ", value.dump(),
                    ", expected \"default\" (ledgerlm's rotary positions are unscaled)");
      } else if (key == "rope_theta") {
        LLM_REQUIRE(value.is_number() && value.get<double>() > 0, origin,
                    ": rope_parameters.rope_theta is ", value.dump(),
                    ", expected a positive number");
        LLM_REQUIRE(!present(j, "rope_theta") || j.at("rope_theta") == value, origin,
                    ": rope_theta and rope_parameters.rope_theta differ");
        m.rope_theta = value.get<double>();
      } else {
        fail(error_message(origin, ": rope_parameters.", key, " is ", value.dump(),
                           ", expected only rope_type \"default\" and rope_theta"));
      }
    }
  } else if (!present(j, "rope_theta")) {
    m.rope_theta = 10000.0;  // the transformers default
  }
  LLM_REQUIRE(m.n_embd % m.n_head == 0, origin, ": hidden_size ", m.n_embd,
              " is not a multiple of num_attention_heads ", m.n_head);
  if (present(j, "head_dim"))
    LLM_REQUIRE(j.at("head_dim") == json(m.n_embd / m.n_head), origin, ": head_dim is ",
                j.at("head_dim").dump(),
                ", expected hidden_size / num_attention_heads = ", m.n_embd / m.n_head,
                " (ledgerlm's heads split the model width)");
  LLM_REQUIRE(m.n_kv_head == 0 || m.n_head % m.n_kv_head == 0, origin, ": num_key_value_heads ",
              m.n_kv_head, " does not divide num_attention_heads ", m.n_head,
              " (each kv head serves a group of query heads)");
  if (m.n_kv_head == m.n_head) m.n_kv_head = 0;  // every head its own k and v: the default
  // Sliding-window attention with use_sliding_window false is full attention: layer_types then
  // names full_attention only.
  if (present(j, "layer_types")) {
    const json& lt = j.at("layer_types");
    LLM_REQUIRE(lt.is_array() && std::all_of(lt.begin(), lt.end(),
                                             [](const json& t) { return t == "full_attention"; }),
                origin, ": layer_types is ", lt.dump(),
                ", expected \"full_attention\" for every layer (no sliding window)");
  }

  // Biases: Qwen2 has them on q, k and v only; Llama on every projection (attention_bias: q, k,
  // v, o; mlp_bias: gate, up, down) or none.
  if (type == "qwen2") {
    for (const char* key : {"attention_bias", "mlp_bias"})
      LLM_REQUIRE(!present(j, key), origin, ": ", key,
                  " is not a Qwen2 key (its q, k, v projections always have a bias)");
    m.bias = false;
    m.qkv_bias = true;
  } else {
    const bool attn = optional_bool(j, "attention_bias", origin);
    const bool mlp = optional_bool(j, "mlp_bias", origin);
    LLM_REQUIRE(attn == mlp, origin, ": attention_bias is ", attn ? "true" : "false",
                " but mlp_bias is ", mlp ? "true" : "false",
                ", expected both the same (ledgerlm's model.bias is on every linear layer or "
                "none)");
    m.bias = attn;
    m.qkv_bias = false;
  }
  if (notes != nullptr && present(j, "attention_dropout") &&
      (!j.at("attention_dropout").is_number() || j.at("attention_dropout").get<double>() != 0.0))
    notes->push_back(error_message("note: ", origin, " has attention_dropout ",
                                   j.at("attention_dropout").dump(),
                                   "; imported with model.dropout = 0 (dropout acts only in "
                                   "training; --model.dropout sets it)"));
  try {
    m.validate();
  } catch (const Error& e) {
    fail(error_message(origin, ": ", e.what()));
  }
  return m;
}

std::vector<std::string> hf_llama_weight_files(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(single)) return {single.string()};
  if (!fs::exists(index)) {
    LLM_REQUIRE(!fs::exists(fs::path(dir) / "pytorch_model.bin"), "import: '", dir,
                "' has pytorch_model.bin but no model.safetensors: safetensors is required "
                "(convert it in Python: AutoModelForCausalLM.from_pretrained(DIR)"
                ".save_pretrained(OUT, safe_serialization=True))");
    fail(error_message("import: '", dir,
                       "' has neither model.safetensors nor model.safetensors.index.json"));
  }
  const std::string origin = "import: '" + index.string() + "'";
  const json j = json::parse(read_text(index.string(), "import: shard index"), nullptr, false);
  LLM_REQUIRE(!j.is_discarded() && j.is_object() && j.contains("weight_map") &&
                  j.at("weight_map").is_object(),
              origin, ": expected a JSON object with a weight_map object");
  std::set<std::string> files;
  for (const auto& [tensor, file] : j.at("weight_map").items()) {
    LLM_REQUIRE(file.is_string(), origin, ": weight_map[\"", tensor, "\"] is ", file.dump(),
                ", expected a file name");
    const std::string name = file.get<std::string>();
    LLM_REQUIRE(!name.empty() && name.find('/') == std::string::npos && name != "..", origin,
                ": weight_map[\"", tensor, "\"] is \"", name,
                "\", expected a file beside the index");
    files.insert(name);
  }
  LLM_REQUIRE(!files.empty(), origin, ": weight_map is empty");
  std::vector<std::string> out;
  for (const std::string& f : files) {
    const fs::path p = fs::path(dir) / f;
    LLM_REQUIRE(fs::exists(p), origin, ": shard '", f, "' does not exist");
    out.push_back(p.string());
  }
  return out;
}

void hf_llama_load_params(const ModelConfig& config, const ParamTable& table,
                          const std::vector<std::string>& files, Tensor params) {
  LLM_REQUIRE(params.dtype == DType::kF32, "import: parameters must be fp32");
  float* dst = params.as<float>();
  std::map<std::string, Place> want;
  for (Place& p : places(config, table)) want.emplace(p.hf, p);
  std::set<std::string> seen;
  std::string tied_head_file;  // a tied lm_head.weight stored anyway: checked at the end
  for (const std::string& path : files) {
    const SafeTensorsFile file = SafeTensorsFile::open(path);
    const std::string where = "import: '" + path + "'";
    for (const SafeTensorInfo& info : file.tensors()) {
      if (is_rotary_buffer(info.name)) continue;  // a constant older versions saved
      LLM_REQUIRE(seen.insert(info.name).second, where, ": tensor '", info.name,
                  "' is stored twice (again in this file)");
      if (info.name == "lm_head.weight" && config.tie_embeddings) {
        tied_head_file = path;
        continue;
      }
      const auto it = want.find(info.name);
      LLM_REQUIRE(it != want.end(), where, ": tensor '", info.name, "' is not a parameter of this ",
                  hf_llama_architecture(config), " configuration");
      const Place& p = it->second;
      LLM_REQUIRE(info.shape == p.hf_shape(), where, ": tensor '", info.name, "' has shape ",
                  safetensors_shape_string(info.shape), ", expected ",
                  safetensors_shape_string(p.hf_shape()));
      const std::vector<float> v =
          file.read_f32(info.name);  // the one tensor held besides the model
      require_finite_weights(where, info.name, info.shape, v);
      const ParamInfo& param = table.params[static_cast<size_t>(p.param)];
      std::memcpy(dst + param.offset + p.row0 * p.cols, v.data(), v.size() * sizeof(float));
    }
  }
  for (const auto& [name, p] : want)
    LLM_REQUIRE(seen.count(name), "import: '", files.front(), "'",
                files.size() > 1 ? " (and its other shards)" : "", ": missing tensor '", name, "'");
  if (!tied_head_file.empty()) {
    // Tied: the head is the token embedding, bit for bit, or the import would change the model.
    const SafeTensorsFile file = SafeTensorsFile::open(tied_head_file);
    const std::vector<float> head = file.read_f32("lm_head.weight");
    const Place& wte = want.at("model.embed_tokens.weight");
    const ParamInfo& param = table.params[static_cast<size_t>(wte.param)];
    LLM_REQUIRE(file.get("lm_head.weight").shape == wte.hf_shape() &&
                    std::memcmp(head.data(), dst + param.offset, head.size() * sizeof(float)) == 0,
                "import: '", tied_head_file,
                "': lm_head.weight differs from model.embed_tokens.weight, but "
                "tie_word_embeddings is true");
  }
}

bool hf_llama_export_family(const ModelConfig& config) {
  // Rotary positions decide: GPT-2 has none, Llama and Qwen2 have nothing else. The rest of the
  // block is then checked against that class (hf_llama_require_exportable) or GPT-2's.
  return config.rope();
}

void hf_llama_require_exportable(const ModelConfig& config) {
  const char* why = "the Hugging Face export writes LlamaForCausalLM / Qwen2ForCausalLM, ";
  LLM_REQUIRE(config.rope(), "export: model.position = ", config.position, ": ", why,
              "which have rotary positions (expected rope)");
  LLM_REQUIRE(config.rms_norm() && config.norm_weight, "export: model.norm = ", config.norm,
              ", model.norm_weight = ", config.norm_weight ? "true" : "false", ": ", why,
              "whose norms are RMSNorm with a weight (expected rmsnorm, true)");
  LLM_REQUIRE(config.mlp_kind() == MlpKind::kSwiglu, "export: model.mlp = ", config.mlp, ": ", why,
              "whose MLP is SwiGLU (expected swiglu)");
  LLM_REQUIRE(!config.qk_norm, "export: model.qk_norm = true: ", why,
              "which have no QK-norm (expected false)");
  LLM_REQUIRE(config.logit_softcap == 0.0, "export: model.logit_softcap = ", config.logit_softcap,
              ": ", why, "which have no soft-cap (expected 0)");
}

const char* hf_llama_architecture(const ModelConfig& config) {
  return !config.bias && config.qkv_bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM";
}

std::string hf_llama_config_json_text(const ModelConfig& config, const HfConfigExtras& extras) {
  config.validate();
  hf_llama_require_exportable(config);
  const bool qwen2 = std::string(hf_llama_architecture(config)) == "Qwen2ForCausalLM";
  json j = json::object();
  for (const MappedKey& k : kKeys) j[k.hf] = mapped_value(k, config);
  j["num_key_value_heads"] = config.kv_heads();
  j["intermediate_size"] = config.ffn_width();
  for (const FixedKey& k : kFixed) j[k.hf] = json::parse(k.value);
  j.erase("use_sliding_window");
  j.erase("use_mrope");
  j.erase("rope_interleaved");
  j["architectures"] = {hf_llama_architecture(config)};
  j["model_type"] = qwen2 ? "qwen2" : "llama";
  j["head_dim"] = config.head_dim();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", config.rope_theta}};
  if (qwen2) {
    j["use_sliding_window"] = false;
    j["sliding_window"] = nullptr;
    j["max_window_layers"] = config.n_layer;
  } else {
    j["attention_bias"] = config.bias;
    j["mlp_bias"] = config.bias;
  }
  auto token_id = [](int64_t id) { return id < 0 ? json(nullptr) : json(id); };
  j["bos_token_id"] = token_id(extras.bos_token_id);
  j["eos_token_id"] = token_id(extras.eos_token_id);
  j["torch_dtype"] = "float32";
  j["use_cache"] = true;
  return j.dump(2) + "\n";
}

std::vector<HfTensor> hf_llama_tensors_from_params(const ModelConfig& config,
                                                   const ParamTable& table, Tensor params) {
  hf_llama_require_exportable(config);
  LLM_REQUIRE(params.dtype == DType::kF32, "export: parameters must be fp32 on the host");
  const float* src = params.as<float>();
  std::vector<HfTensor> out;
  for (const Place& p : places(config, table)) {
    HfTensor t;
    t.name = p.hf;
    t.shape = p.hf_shape();
    const float* first = src + table.params[static_cast<size_t>(p.param)].offset + p.row0 * p.cols;
    t.data.assign(first, first + p.rows * p.cols);
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

// "model.layers.0.self_attn.q_proj.weight" -> "model.layers.0.self_attn.q_proj".
std::string module_of(const std::string& weight) {
  return weight.substr(0, weight.size() - std::string(".weight").size());
}

}  // namespace

std::vector<HfTensor> hf_llama_peft_tensors(const ModelConfig& config, const ParamTable& table,
                                            const std::vector<HfTensor>& factors) {
  hf_llama_require_exportable(config);
  const std::vector<Place> all = places(config, table);
  std::vector<HfTensor> out;
  for (const HfTensor& f : factors) {  // named by the table: "block.0.attn.qkv.lora_a"
    const ParamInfo& p = table.find(f.name);
    LLM_ASSERT(p.lora != ParamInfo::Lora::kNone, f.name);
    const bool a = p.lora == ParamInfo::Lora::kA;
    // The rows of the base weight the adapter adapts: the whole fused qkv (one adapter, written
    // as q, k and v adapters sharing A) or one module's own rows (q, k, v's own adapters).
    const ParamInfo& fb = a ? table.params[static_cast<size_t>(table.index_of(f.name) + 1)] : p;
    const int64_t row0 = p.lora_row0, rows = fb.shape[0];
    for (const Place& place : all) {
      if (place.param != p.lora_base || place.vector) continue;
      if (place.row0 < row0 || place.row0 + place.rows > row0 + rows) continue;
      HfTensor t;
      t.name =
          "base_model.model." + module_of(place.hf) + (a ? ".lora_A.weight" : ".lora_B.weight");
      if (a) {  // (r, in): every module of the layer reads the same input
        t.shape = f.shape;
        t.data = f.data;
      } else {  // (out, r): the module's rows
        const int64_t r = f.shape[1];
        t.shape = {place.rows, r};
        const auto first = f.data.begin() + (place.row0 - row0) * r;
        t.data.assign(first, first + place.rows * r);
      }
      out.push_back(std::move(t));
    }
  }
  return out;
}

std::vector<std::string> hf_llama_peft_modules(const ModelConfig& config) {
  const BlockRecipe recipe = block_recipe(config);
  ParamTable table = param_table_build(config);
  std::vector<std::string> modules;
  for (const Place& place : places(config, table)) {
    const ParamInfo& p = table.params[static_cast<size_t>(place.param)];
    if (place.vector || p.name.rfind("block.0.", 0) != 0) continue;
    for (int site = 0; site < kLoraSites; ++site) {
      const TensorRole& r = recipe.block[static_cast<size_t>(recipe.lora_sites[site].role)];
      if (recipe_block_name(r, 0) != p.name || !config.lora.targets_layer(lora_target_name(site)))
        continue;
      const LoraRows rows = recipe_lora_rows(recipe, site);  // the module's rows lie in the site's
      if (place.row0 < rows.row0 || place.row0 + place.rows > rows.row0 + rows.rows) continue;
      const std::string m = module_of(place.hf);
      modules.push_back(m.substr(m.rfind('.') + 1));  // "q_proj": PEFT matches the suffix
    }
  }
  return modules;
}

}  // namespace ledgerlm
