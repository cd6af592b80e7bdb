// Table-driven conversion between ledgerlm parameters and HF GPT-2 tensors (see hf_export.h).
#include "ckpt/hf_export.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "ckpt/safetensors.h"
#include "model/base/check.h"

namespace ledgerlm {
namespace {

// Scalar load/store of host buffers in any float dtype. Export is a cold path: per-element
// switches are fine and keep this independent of a backend.
double load_element(Tensor t, int64_t i) {
  switch (t.dtype) {
    case DType::kF32:
      return t.as<float>()[i];
    case DType::kF64:
      return t.as<double>()[i];
    case DType::kBF16:
      return bf16_to_f32(t.as<uint16_t>()[i]);
    case DType::kF16:
      return f16_to_f32(t.as<uint16_t>()[i]);
    default:
      break;
  }
  fail(error_message("hf export: parameters must be a float dtype, got ", dtype_name(t.dtype)));
}

void store_element(Tensor t, int64_t i, double v) {
  switch (t.dtype) {
    case DType::kF32:
      t.as<float>()[i] = static_cast<float>(v);
      return;
    case DType::kF64:
      t.as<double>()[i] = v;
      return;
    case DType::kBF16:
      t.as<uint16_t>()[i] = f32_to_bf16(static_cast<float>(v));
      return;
    case DType::kF16:
      t.as<uint16_t>()[i] = f32_to_f16(static_cast<float>(v));
      return;
    default:
      break;
  }
  fail(error_message("hf import: parameters must be a float dtype, got ", dtype_name(t.dtype)));
}

void require_float(Tensor t, const char* what) {
  LLM_REQUIRE(t.dtype == DType::kF32 || t.dtype == DType::kF64 || t.dtype == DType::kBF16 ||
                  t.dtype == DType::kF16,
              what, ": parameters must be fp32, fp64, bf16 or fp16, got ", dtype_name(t.dtype));
  LLM_REQUIRE(!t.empty(), what, ": parameter buffer is empty");
}

// The HF shape of a table tensor: real rows only, and (in, out) for Conv1D weights.
std::vector<int64_t> hf_shape(const ParamInfo& p) {
  std::vector<int64_t> shape = p.shape;
  shape[0] = p.hf_rows;
  if (p.hf_transpose) {
    LLM_ASSERT(shape.size() == 2, p.name);
    std::swap(shape[0], shape[1]);
  }
  return shape;
}

// Elements per row of the table tensor (1 for vectors).
int64_t row_length(const ParamInfo& p) {
  return p.shape.size() >= 2 ? p.numel / p.shape[0] : 1;
}

bool hf_name_is_ignored(const std::string& name) {
  auto ends_with = [&](const char* s) {
    size_t n = std::strlen(s);
    return name.size() >= n && name.compare(name.size() - n, n, s) == 0;
  };
  return name == "lm_head.weight" || ends_with(".attn.bias") || ends_with(".attn.masked_bias");
}

}  // namespace

std::vector<HfTensor> hf_tensors_from_params(const ParamTable& table, Tensor params) {
  require_float(params, "hf export");
  std::vector<HfTensor> out;
  out.reserve(table.params.size());
  for (const ParamInfo& p : table.params) {
    LLM_ASSERT(!p.hf_name.empty() && p.hf_rows > 0 && p.hf_rows <= p.shape[0], p.name);
    HfTensor t;
    t.name = p.hf_name;
    t.shape = hf_shape(p);
    const int64_t cols = row_length(p);
    const int64_t n = p.hf_rows * cols;  // the real rows are the leading ones
    t.data.resize(static_cast<size_t>(n));
    if (p.hf_transpose) {
      // ours (out=R, in=cols) -> HF (in, out): hf[c][r] = ours[r][c]
      const int64_t rows = p.hf_rows;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          t.data[static_cast<size_t>(c * rows + r)] =
              static_cast<float>(load_element(params, p.offset + r * cols + c));
    } else {
      for (int64_t i = 0; i < n; ++i)
        t.data[static_cast<size_t>(i)] = static_cast<float>(load_element(params, p.offset + i));
    }
    out.push_back(std::move(t));
  }
  return out;
}

void params_from_hf_tensors(const ParamTable& table, const std::vector<HfTensor>& tensors,
                            Tensor params) {
  require_float(params, "hf import");
  std::map<std::string, const HfTensor*> by_name;
  for (const HfTensor& t : tensors) {
    LLM_REQUIRE(by_name.emplace(t.name, &t).second, "hf import: tensor '", t.name, "' given twice");
  }
  std::map<std::string, int> table_by_hf;
  for (size_t i = 0; i < table.params.size(); ++i)
    table_by_hf[table.params[i].hf_name] = static_cast<int>(i);
  for (const HfTensor& t : tensors) {
    LLM_REQUIRE(table_by_hf.count(t.name) || hf_name_is_ignored(t.name), "hf import: tensor '",
                t.name, "' is not a parameter of this GPT-2 configuration");
  }

  for (const ParamInfo& p : table.params) {
    auto it = by_name.find(p.hf_name);
    LLM_REQUIRE(it != by_name.end(), "hf import: missing tensor '", p.hf_name, "' (for ", p.name,
                ")");
    const HfTensor& t = *it->second;
    const std::vector<int64_t> want = hf_shape(p);
    LLM_REQUIRE(t.shape == want, "hf import: tensor '", t.name, "' has shape ",
                safetensors_shape_string(t.shape), ", expected ", safetensors_shape_string(want));
    const int64_t cols = row_length(p), rows = p.hf_rows;
    LLM_REQUIRE(static_cast<int64_t>(t.data.size()) == rows * cols, "hf import: tensor '", t.name,
                "' holds ", t.data.size(), " values, its shape needs ", rows * cols);
    if (p.hf_transpose) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          store_element(params, p.offset + r * cols + c, t.data[static_cast<size_t>(c * rows + r)]);
    } else {
      for (int64_t i = 0; i < rows * cols; ++i)
        store_element(params, p.offset + i, t.data[static_cast<size_t>(i)]);
    }
    // Padded vocab rows carry no information in HF: they are zero here.
    for (int64_t i = rows * cols; i < p.numel; ++i) store_element(params, p.offset + i, 0.0);
  }
}

void hf_write_safetensors(const std::string& path, const std::vector<HfTensor>& tensors) {
  SafeTensorsWriter writer;
  for (const HfTensor& t : tensors) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    LLM_REQUIRE(n == static_cast<int64_t>(t.data.size()), "hf export: tensor '", t.name, "' holds ",
                t.data.size(), " values but its shape ", safetensors_shape_string(t.shape),
                " needs ", n);
    writer.add(t.name, DType::kF32, t.shape, t.data.data());
  }
  writer.set_metadata("format", "pt");
  writer.write_atomic(path);
}

std::vector<HfTensor> hf_read_safetensors(const std::string& path) {
  SafeTensorsFile file = SafeTensorsFile::open(path);
  std::vector<HfTensor> out;
  for (const SafeTensorInfo& info : file.tensors()) {
    HfTensor t;
    t.name = info.name;
    t.shape = info.shape;
    t.data = file.read_f32(info.name);
    out.push_back(std::move(t));
  }
  return out;
}

void hf_require_gpt2_block(const ModelConfig& config) {
  const char* why = "the Hugging Face export writes GPT2LMHeadModel, whose blocks have ";
  LLM_REQUIRE(config.norm == "layernorm", "export: model.norm = ", config.norm, ": ", why,
              "LayerNorm (expected model.norm = layernorm)");
  LLM_REQUIRE(config.norm_weight, "export: model.norm_weight = false: ", why,
              "norms with a learnable weight (expected true)");
  LLM_REQUIRE(config.norm_eps == 1e-5, "export: model.norm_eps = ", config.norm_eps, ": ", why,
              "LayerNorm eps 1e-5");
  LLM_REQUIRE(config.bias, "export: model.bias = false: ", why,
              "biases on every linear layer and norm (expected true)");
  LLM_REQUIRE(config.mlp_kind() == MlpKind::kGelu, "export: model.mlp = ", config.mlp,
              ": Hugging Face GPT-2 has no such MLP (expected gelu, its gelu_new)");
  LLM_REQUIRE(config.logit_softcap == 0.0, "export: model.logit_softcap = ", config.logit_softcap,
              ": Hugging Face GPT-2 has no logit soft-cap (expected 0)");
  LLM_REQUIRE(!config.rope(),
              "export: model.position = rope cannot be written as Hugging Face "
              "GPT-2 (expected learned positions)");
  LLM_REQUIRE(config.kv_heads() == config.n_head, "export: model.n_kv_head = ", config.n_kv_head,
              " cannot be written as Hugging Face GPT-2 (expected 0 or model.n_head = ",
              config.n_head, ")");
  LLM_REQUIRE(!config.qk_norm,
              "export: model.qk_norm = true cannot be written as Hugging Face "
              "GPT-2 (expected false)");
}

std::string hf_config_json_text(const ModelConfig& config, const HfConfigExtras& extras) {
  config.validate();
  hf_require_gpt2_block(config);
  using nlohmann::json;
  auto token_id = [](int64_t id) { return id < 0 ? json(nullptr) : json(id); };
  json j = {
      {"architectures", {"GPT2LMHeadModel"}},
      {"model_type", "gpt2"},
      {"vocab_size", config.vocab_size},
      {"n_positions", config.block_size},
      {"n_ctx", config.block_size},
      {"n_embd", config.n_embd},
      {"n_layer", config.n_layer},
      {"n_head", config.n_head},
      // null: GPT-2's 4 x n_embd (model.ffn_hidden = 0 or that width), else the MLP's width.
      {"n_inner",
       config.ffn_width() == 4 * config.n_embd ? json(nullptr) : json(config.ffn_width())},
      {"activation_function", "gelu_new"},  // the tanh approximation ledgerlm uses
      {"layer_norm_epsilon", 1e-5},
      {"initializer_range", 0.02},
      {"resid_pdrop", config.dropout},
      {"embd_pdrop", config.dropout},
      {"attn_pdrop", config.dropout},
      {"scale_attn_weights", true},
      {"scale_attn_by_inverse_layer_idx", false},
      {"reorder_and_upcast_attn", false},
      {"tie_word_embeddings", config.tie_embeddings},  // untied: lm_head.weight is stored
      {"use_cache", true},
      {"bos_token_id", token_id(extras.bos_token_id)},
      {"eos_token_id", token_id(extras.eos_token_id)},
      {"torch_dtype", "float32"},
  };
  return j.dump(2) + "\n";
}

void hf_write_config_json(const std::string& path, const ModelConfig& config,
                          const HfConfigExtras& extras) {
  const std::string text = hf_config_json_text(config, extras);
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  LLM_REQUIRE(f != nullptr, "cannot create '", tmp, "': ", std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(error_message("cannot write '", path, "'"));
  }
}

}  // namespace ledgerlm
