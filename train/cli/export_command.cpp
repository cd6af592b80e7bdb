// `ledgerlm export --format hf`: a run's weights as a Hugging Face GPT2LMHeadModel directory (or,
// for rotary positions, LlamaForCausalLM / Qwen2ForCausalLM: ckpt/hf_llama.h) — model.safetensors
// (HF tensor names and layout, real vocab rows only), config.json and the tokenizer: for bpe and
// bytes, tokenizer.json and tokenizer_config.json that transformers' AutoTokenizer loads with
// exactly ledgerlm's ids (data/tokenizer_json.h), and for bpe also the sentencepiece
// tokenizer.model; for hf-bpe the Hugging Face files the data was prepared with. A run without data
// (`import` without --data) has no tokenizer: its export is the weights and config.json only. Built
// in a temporary directory and renamed, so --out is either absent or complete.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ckpt/checkpoint.h"
#include "ckpt/finite_weights.h"
#include "ckpt/hf_export.h"
#include "ckpt/hf_llama.h"
#include "ckpt/peft_export.h"
#include "ckpt/safetensors.h"
#include "data/tokenizer_json.h"
#include "model/backends/backend_factory.h"
#include "model/base/atomic_file.h"
#include "model/base/check.h"
#include "train/cli/commands.h"
#include "train/run/loaded_run.h"
#include "train/run/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

void export_hf(const LoadedRun& run, Backend& backend, const std::string& dir) {
  // Rotary positions: LlamaForCausalLM / Qwen2ForCausalLM; else GPT-2.
  const ModelConfig& model = run.config.model;
  const bool llama = hf_llama_export_family(model);
  // Before any file is written.
  llama ? hf_llama_require_exportable(model) : hf_require_gpt2_block(model);
  // The weights come to the host once; the export reads that copy.
  std::vector<float> host(static_cast<size_t>(run.table.total));
  backend.copy_to_host(host.data(), run.params_tensor(), run.table.total);
  const Tensor params(host.data(), DType::kF32);
  std::vector<HfTensor> tensors = llama ? hf_llama_tensors_from_params(model, run.table, params)
                                        : hf_tensors_from_params(run.table, params);
  hf_write_safetensors(dir + "/model.safetensors", tensors);
  HfConfigExtras extras;
  if (run.tokenizer) {
    extras.bos_token_id = run.meta.eot_id;  // GPT-2 uses its end-of-text token for both
    extras.eos_token_id = run.meta.eot_id;
  }
  if (llama)
    write_file_atomic(dir + "/config.json", hf_llama_config_json_text(model, extras));
  else
    hf_write_config_json(dir + "/config.json", model, extras);
  if (!run.tokenizer) return;  // no data attached: nothing to say about the text
  if (run.meta.tokenizer == "hf-bpe") {
    run.tokenizer->save(dir);  // tokenizer.json (or vocab.json + merges.txt) as read
    return;
  }
  HfTokenizerFiles files;
  if (run.meta.tokenizer == "bytes") {
    files = hf_tokenizer_files_bytes(run.meta.eot_id, run.config.model.block_size);
  } else {
    // The tokenizer run_load checked, written as tokenizer.model (for sentencepiece users) and
    // read back for the mapping.
    run.tokenizer->save(dir);
    const std::string spm = dir + "/tokenizer.model";
    std::ifstream in(spm, std::ios::binary);
    std::ostringstream proto;
    proto << in.rdbuf();
    LLM_REQUIRE(in && !in.bad(), "export: cannot read back '", spm, "'");
    files = hf_tokenizer_files_bpe(proto.str(), run.tokenizer_dir + "/tokenizer.model",
                                   run.config.model.block_size);
  }
  write_file_atomic(dir + "/tokenizer.json", files.tokenizer_json);
  write_file_atomic(dir + "/tokenizer_config.json", files.tokenizer_config_json);
}

// What adapter_config.json's base_model_name_or_path names: the model the adapters were trained
// on, the frozen base. That is the run's recorded --init-from source (its last checkpoint's
// frozen.init_from). When that source is a run `import` made, its weights file records the
// Hugging Face directory it came from, which transformers and PEFT load as they are: that
// directory. Otherwise the base exists only as ledgerlm weights, and the absolute path of the
// source (or, for a base from the seed's init, of the run itself) says which weights to export
// with `export --format hf` and load the adapter onto.
std::string peft_base_path(const std::string& run_dir) {
  const std::string run_abs = fs::absolute(run_dir).lexically_normal().string();
  const std::string latest = checkpoint_latest(run_dir + "/ckpt");
  if (latest.empty()) return run_abs;
  const CheckpointReader ckpt = CheckpointReader::open(latest);
  const nlohmann::json& meta = ckpt.meta();
  std::string source;
  if (meta.contains("frozen") && meta.at("frozen").is_object() &&
      meta.at("frozen").contains("init_from") && meta.at("frozen").at("init_from").is_string())
    source = meta.at("frozen").at("init_from").get<std::string>();
  if (source.empty()) return run_abs;
  // init_from's sources: a weights file, a run directory (its model.safetensors), a checkpoint.
  fs::path weights(source);
  if (fs::is_directory(weights)) weights /= "model.safetensors";
  if (fs::is_regular_file(weights)) {
    const SafeTensorsFile f = SafeTensorsFile::open(weights.string());
    const auto it = f.metadata().find("imported_from");
    if (it != f.metadata().end() && fs::is_regular_file(fs::path(it->second) / "config.json"))
      return it->second;
  }
  return source;
}

// The adapters of a LoRA run (its model.safetensors holds them beside the frozen base).
// Returns the base it names (peft_base_path).
std::string export_peft(const std::string& run_dir, const std::string& dir) {
  const RunConfig config = run_load_config(run_dir);
  LLM_REQUIRE(config.model.lora.enabled(), "export --lora-only: run '", run_dir,
              "' has no adapters (lora.rank = 0); export its weights without --lora-only");
  // The adapters' base must be an HF GPT-2, Llama or Qwen2.
  const bool llama = hf_llama_export_family(config.model);
  llama ? hf_llama_require_exportable(config.model) : hf_require_gpt2_block(config.model);
  if (!llama) peft_require_gpt2_targets(config.model);
  const ParamTable table = param_table_build(config.model);
  const std::string weights = run_dir + "/model.safetensors";
  LLM_REQUIRE(fs::exists(weights), "run '", run_dir,
              "': no model.safetensors (did the training finish?)");
  const SafeTensorsFile f = SafeTensorsFile::open(weights);
  std::vector<HfTensor> tensors;
  for (const ParamInfo& p : table.params) {
    if (p.lora == ParamInfo::Lora::kNone) continue;
    const SafeTensorInfo& info = f.get(p.name);
    LLM_REQUIRE(info.shape == p.shape, "weights file '", weights, "': tensor '", p.name,
                "' has shape ", safetensors_shape_string(info.shape), ", expected ",
                safetensors_shape_string(p.shape));
    std::vector<float> v = f.read_f32(p.name);
    require_finite_weights("run '" + run_dir + "': model.safetensors", p.name, p.shape, v);
    tensors.push_back({llama ? p.name : peft_tensor_name(table, p), p.shape, std::move(v)});
  }
  if (llama) tensors = hf_llama_peft_tensors(config.model, table, tensors);
  hf_write_safetensors(dir + "/adapter_model.safetensors", tensors);
  const std::string base = peft_base_path(run_dir);
  write_file_atomic(dir + "/adapter_config.json", peft_adapter_config_json(config.model, base));
  return base;
}

}  // namespace

int command_export(const ExportCommand& cmd) {
  LLM_REQUIRE(cmd.format == "hf", "export --format ", cmd.format,
              ": expected hf (Hugging Face GPT-2, Llama or Qwen2)");
  LLM_REQUIRE(!cmd.out_dir.empty(), "export: --out is required");
  LLM_REQUIRE(!fs::exists(cmd.out_dir), "export: --out '", cmd.out_dir,
              "' already exists (choose a new directory)");
  if (cmd.lora_only) {
    LLM_REQUIRE(fs::is_directory(cmd.run_dir), "run '", cmd.run_dir, "' does not exist");
    const std::string tmp =
        cmd.out_dir + ".tmp" + std::to_string(static_cast<long long>(::getpid()));
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    std::string base;
    try {
      base = export_peft(cmd.run_dir, tmp);
      fs::rename(tmp, cmd.out_dir);
    } catch (...) {
      std::error_code ec;
      fs::remove_all(tmp, ec);
      throw;
    }
    std::printf(
        "exported the LoRA adapters of %s as a PEFT adapter to %s: "
        "adapter_model.safetensors, adapter_config.json (base_model_name_or_path %s; load on "
        "the base model with PeftModel.from_pretrained)\n",
        cmd.run_dir.c_str(), cmd.out_dir.c_str(), base.c_str());
    return 0;
  }
  auto backend = backend_create("cpu", {1, 0});
  // An imported run without data is exported from its weights alone.
  LLM_REQUIRE(fs::is_directory(cmd.run_dir), "run '", cmd.run_dir, "' does not exist");
  const bool with_data = run_has_tokenizer(cmd.run_dir);
  LoadedRun run =
      with_data ? run_load(cmd.run_dir, *backend) : run_load_model(cmd.run_dir, *backend);
  fs::path out(cmd.out_dir);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  const std::string tmp = cmd.out_dir + ".tmp" + std::to_string(static_cast<long long>(::getpid()));
  fs::remove_all(tmp);
  std::error_code ec;
  fs::create_directories(tmp, ec);
  LLM_REQUIRE(!ec, "export: cannot create '", tmp, "': ", ec.message());
  try {
    export_hf(run, *backend, tmp);
    fs::rename(tmp, cmd.out_dir, ec);
    LLM_REQUIRE(!ec, "export: cannot rename '", tmp, "' to '", cmd.out_dir, "': ", ec.message());
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  const char* tokenizer = !with_data                      ? "no tokenizer (the run has no data)"
                          : run.meta.tokenizer == "bytes" ? "tokenizer.json, tokenizer_config.json"
                          : run.meta.tokenizer == "bpe"
                              ? "tokenizer.json, tokenizer_config.json, tokenizer.model"
                              : "the tokenizer's Hugging Face files";
  const char* architecture = hf_llama_export_family(run.config.model)
                                 ? hf_llama_architecture(run.config.model)
                                 : "GPT2LMHeadModel";
  std::printf(
      "exported %s (%lld parameters) as Hugging Face %s to %s: model.safetensors, "
      "config.json, %s\n",
      cmd.run_dir.c_str(), static_cast<long long>(run.table.num_params), architecture,
      cmd.out_dir.c_str(), tokenizer);
  return 0;
}

}  // namespace ledgerlm
