// Reading a Hugging Face GPT-2 directory as a ledgerlm model (see hf_import.h).
#include "ckpt/hf_import.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ckpt/finite_weights.h"
#include "ckpt/hf_llama.h"
#include "ckpt/safetensors.h"
#include "model/backend/common/op_constants.h"
#include "model/base/check.h"
#include "model/base/input_file.h"
#include "model/block_recipe.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The keys of one config.json, each refusal naming the file and the key.
class ConfigJson {
 public:
  ConfigJson(const json& j, std::string origin) : j_(j), origin_(std::move(origin)) {}

  bool has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }
  const json& at(const char* key) const { return j_[key]; }
  const std::string& origin() const { return origin_; }

  int64_t positive_int(const char* key) const {
    LLM_REQUIRE(has(key), origin_, ": no '", key, "' (a GPT-2 config.json has it)");
    const json& v = j_[key];
    LLM_REQUIRE(v.is_number_integer() && v.get<int64_t>() > 0, origin_, ": ", key, " is ", v.dump(),
                ", expected a positive integer");
    return v.get<int64_t>();
  }
  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    LLM_REQUIRE(j_[key].is_boolean(), origin_, ": ", key, " is ", j_[key].dump(),
                ", expected true or false");
    return j_[key].get<bool>();
  }
  double number(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    LLM_REQUIRE(j_[key].is_number(), origin_, ": ", key, " is ", j_[key].dump(),
                ", expected a number");
    return j_[key].get<double>();
  }
  std::string text(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    LLM_REQUIRE(j_[key].is_string(), origin_, ": ", key, " is ", j_[key].dump(),
                ", expected a string");
    return j_[key].get<std::string>();
  }
  // A boolean key that must keep GPT-2's value for ledgerlm to compute the same function.
  void require_bool(const char* key, bool fallback, bool wanted, const char* why) const {
    LLM_REQUIRE(boolean(key, fallback) == wanted, origin_, ": ", key, " is ",
                wanted ? "false" : "true", ", expected ", wanted ? "true" : "false", " (", why,
                ")");
  }

 private:
  const json& j_;
  std::string origin_;
};

std::string read_text(const std::string& path) {
  const int fd = input_file_open(path, "import: config file");
  LLM_REQUIRE(fd >= 0, "import: cannot read '", path, "' (", errno_text(), ")");
  return input_file_read_fd(fd, path, "import: config file");
}

// The full HF name of a tensor: GPT2Model saves its tensors without the "transformer." prefix
// GPT2LMHeadModel gives them; the LM head has none in either.
std::string full_hf_name(const std::string& name) {
  if (name == "lm_head.weight" || name.rfind("transformer.", 0) == 0) return name;
  return "transformer." + name;
}

// Causal-mask buffers older transformers saved with the weights: constants, not parameters.
bool is_mask_buffer(const std::string& name) {
  auto ends_with = [&](const char* s) {
    const size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

// GPT2Config's default dropout probability (resid, embd, attn).
constexpr double kHfDefaultDropout = 0.1;

double merged_dropout(const ConfigJson& c, std::vector<std::string>* notes) {
  const double resid = c.number("resid_pdrop", kHfDefaultDropout);
  const double embd = c.number("embd_pdrop", kHfDefaultDropout);
  const double attn = c.number("attn_pdrop", kHfDefaultDropout);
  for (double p : {resid, embd, attn})
    LLM_REQUIRE(p >= 0.0 && p < 1.0, c.origin(), ": dropout probabilities must be in [0, 1) (got ",
                p, ")");
  if ((embd != resid || attn != resid) && notes != nullptr)
    notes->push_back(error_message(
        "note: ", c.origin(), " has resid_pdrop ", resid, ", embd_pdrop ", embd, ", attn_pdrop ",
        attn, "; ledgerlm has one model.dropout for all three: set to resid_pdrop = ", resid,
        " (dropout acts only in training; --model.dropout overrides it)"));
  return resid;
}

}  // namespace

ModelConfig hf_config_from_json(const std::string& text, const std::string& origin,
                                std::vector<std::string>* notes) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  LLM_REQUIRE(!j.is_discarded(), origin, ": not valid JSON");
  LLM_REQUIRE(j.is_object(), origin, ": expected a JSON object");
  const ConfigJson c(j, origin);

  LLM_REQUIRE(c.has("model_type"), origin, ": no 'model_type', expected \"gpt2\"");
  const std::string type = c.text("model_type", "");
  LLM_REQUIRE(type == "gpt2", origin, ": model_type is \"", type,
              "\", expected \"gpt2\", \"llama\" or \"qwen2\"");

  // GELU's tanh approximation under both of its HF names ("gelu_pytorch_tanh" is the same
  // function computed by torch's fused kernel).
  const std::string act = c.text("activation_function", "gelu_new");
  LLM_REQUIRE(act == "gelu_new" || act == "gelu_pytorch_tanh", origin,
              ": activation_function is \"", act,
              "\", expected \"gelu_new\" or \"gelu_pytorch_tanh\" (ledgerlm's MLP uses GELU's "
              "tanh approximation)");
  const double eps = c.number("layer_norm_epsilon", kLayerNormEps);
  LLM_REQUIRE(eps == kLayerNormEps, origin, ": layer_norm_epsilon is ",
              c.at("layer_norm_epsilon").dump(), ", expected ", kLayerNormEps,
              " (ledgerlm's LayerNorm eps)");
  c.require_bool("scale_attn_weights", true, true,
                 "ledgerlm scales attention scores by 1/sqrt(head_dim)");
  c.require_bool("scale_attn_by_inverse_layer_idx", false, false,
                 "ledgerlm does not scale attention by 1/(layer index + 1)");
  c.require_bool("add_cross_attention", false, false, "ledgerlm's blocks have no cross-attention");

  ModelConfig m;
  m.vocab_size = c.positive_int("vocab_size");
  m.block_size = c.positive_int("n_positions");
  m.n_embd = c.positive_int("n_embd");
  m.n_layer = c.positive_int("n_layer");
  m.n_head = c.positive_int("n_head");
  LLM_REQUIRE(m.n_embd % m.n_head == 0, origin, ": n_embd ", m.n_embd,
              " is not a multiple of n_head ", m.n_head);
  // The MLP's width: null is GPT-2's 4 x n_embd, which model.ffn_hidden = 0 means too.
  if (c.has("n_inner")) {
    const json& inner = c.at("n_inner");
    LLM_REQUIRE(inner.is_number_integer() && inner.get<int64_t>() > 0 &&
                    inner.get<int64_t>() <= kMaxFfnHidden,
                origin, ": n_inner is ", inner.dump(), ", expected null or 1..", kMaxFfnHidden,
                " (the MLP's hidden width)");
    m.ffn_hidden = inner.get<int64_t>() == 4 * m.n_embd ? 0 : inner.get<int64_t>();
  }
  // false: the head is its own matrix, lm_head.weight (model.tie_embeddings = false).
  m.tie_embeddings = c.boolean("tie_word_embeddings", true);
  m.dropout = merged_dropout(c, notes);
  m.validate();
  return m;
}

HfModel hf_read_model_dir(const std::string& dir) {
  LLM_REQUIRE(fs::is_directory(dir), "import: '", dir, "' is not a directory");
  const std::string config_path = (fs::path(dir) / "config.json").string();
  LLM_REQUIRE(fs::exists(config_path), "import: '", dir,
              "' has no config.json (expected a Hugging Face model directory)");
  HfModel model;
  model.weights_path = (fs::path(dir) / "model.safetensors").string();
  {
    const std::string text = read_text(config_path);
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("model_type") && j.at("model_type").is_string() &&
        hf_llama_model_type(j.at("model_type").get<std::string>())) {
      model.llama = true;
      model.config = hf_llama_config_from_json(text, "import: '" + config_path + "'", &model.notes);
      model.weight_files = hf_llama_weight_files(dir);
      model.weights_path = model.weight_files.front();
      return model;
    }
  }
  if (!fs::exists(model.weights_path)) {
    LLM_REQUIRE(!fs::exists(fs::path(dir) / "model.safetensors.index.json"), "import: '", dir,
                "' holds sharded safetensors (model.safetensors.index.json): save it as one "
                "file, save_pretrained(OUT, safe_serialization=True, max_shard_size=\"100GB\")");
    LLM_REQUIRE(!fs::exists(fs::path(dir) / "pytorch_model.bin"), "import: '", dir,
                "' has pytorch_model.bin but no model.safetensors: safetensors is required "
                "(convert it in Python: GPT2LMHeadModel.from_pretrained(DIR)"
                ".save_pretrained(OUT, safe_serialization=True))");
    fail(error_message("import: '", dir, "' has no model.safetensors"));
  }
  model.config =
      hf_config_from_json(read_text(config_path), "import: '" + config_path + "'", &model.notes);

  const SafeTensorsFile file = SafeTensorsFile::open(model.weights_path);
  const std::string where = "import: '" + model.weights_path + "'";
  std::map<std::string, std::string> given_as;  // full name -> the name in the file
  bool has_lm_head = false;
  std::vector<float> lm_head;
  std::vector<int64_t> lm_head_shape;
  for (const SafeTensorInfo& info : file.tensors()) {
    if (is_mask_buffer(info.name)) continue;  // never read: it may be an integer dtype
    const std::string name = full_hf_name(info.name);
    auto [it, fresh] = given_as.emplace(name, info.name);
    LLM_REQUIRE(fresh, where, ": tensor '", name, "' is there twice (as '", it->second, "' and '",
                info.name, "')");
    std::vector<float> data = file.read_f32(info.name);
    // NaN or infinity would import and only fail later, in eval or sample: refused here, naming
    // the tensor as the file names it and its first bad element, before anything is written.
    require_finite_weights(where, info.name, info.shape, data);
    if (name == "lm_head.weight" && model.config.tie_embeddings) {
      has_lm_head = true;
      lm_head = std::move(data);
      lm_head_shape = info.shape;
      continue;
    }
    model.tensors.push_back({name, info.shape, std::move(data)});
  }

  // A tied LM head must be the token embedding: a file that stores it (some tools do) is
  // imported only when it is wte, bit for bit. An untied one is a tensor of its own.
  if (has_lm_head) {
    const HfTensor* wte = nullptr;
    const std::string wte_name = recipe_unit_hf_name(block_recipe(model.config).embed[kRoleWte]);
    for (const HfTensor& t : model.tensors)
      if (t.name == wte_name) wte = &t;
    LLM_REQUIRE(wte != nullptr, where, ": has lm_head.weight but no wte.weight");
    LLM_REQUIRE(lm_head_shape == wte->shape && std::memcmp(lm_head.data(), wte->data.data(),
                                                           lm_head.size() * sizeof(float)) == 0,
                where,
                ": lm_head.weight differs from wte.weight, expected them tied (ledgerlm's LM head "
                "is the token embedding)");
  }
  return model;
}

void hf_model_to_params(const HfModel& model, const ParamTable& table, Tensor params) {
  if (model.llama) {  // streamed, its errors naming the file
    hf_llama_load_params(model.config, table, model.weight_files, params);
    return;
  }
  try {
    params_from_hf_tensors(table, model.tensors, params);
  } catch (const Error& e) {
    // params_from_hf_tensors names the tensor; the file is what the user knows.
    std::string what = e.what();
    const std::string prefix = "hf import: ";
    if (what.rfind(prefix, 0) == 0) what.erase(0, prefix.size());
    fail(error_message("import: '", model.weights_path, "': ", what));
  }
}

}  // namespace ledgerlm
