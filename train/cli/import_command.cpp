// `ledgerlm import --format hf`: a Hugging Face GPT2LMHeadModel, LlamaForCausalLM or
// Qwen2ForCausalLM directory as a ledgerlm run directory — config.toml (the model section from
// config.json, data.dir from --data) and model.safetensors under the parameter table's names, fp32
// — so that eval, sample, export and `train --init-from` take it like a run ledgerlm trained.
// --data must have been prepared with the model directory's own tokenizer
// (import_command_tokenizer.h). Everything is read and checked first; the run is then built in a
// temporary directory and renamed, so --out is either absent or complete.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "ckpt/hf_import.h"
#include "ckpt/safetensors.h"
#include "data/data_check.h"
#include "data/meta.h"
#include "model/base/check.h"
#include "train/cli/commands.h"
#include "train/cli/import_command_tokenizer.h"
#include "train/run/run_dir.h"
#include "train/run/run_tokenizer.h"
#include "train/step/placement.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

// The run's config: the imported model, its data (if any), and the run's name and place, so
// that `--config runs/NAME/config.toml` describes it like a trained run's.
RunConfig import_config(const ImportCommand& cmd, const std::string& out_dir,
                        const ModelConfig& model) {
  RunConfig cfg;
  cfg.model = model;
  const fs::path out = fs::path(out_dir).lexically_normal();
  cfg.train.name = out.filename().string();
  cfg.train.out_dir = out.has_parent_path() ? out.parent_path().string() : ".";
  // eval reads windows of train.seq_len tokens: the model's whole context up to 1024 (GPT-2's).
  // A long-context model's 8192 (SmolLM2) or 32768 (Qwen2.5) would make eval's batch of windows
  // hold gigabytes of logits per forward; train sets its own --train.seq_len.
  constexpr int64_t kImportSeqLen = 1024;
  cfg.train.seq_len = std::min(model.block_size, kImportSeqLen);
  cfg.data.dir.clear();  // no data attached unless --data names it
  if (!cmd.data_dir.empty()) {
    const DataMeta meta = meta_read(cmd.data_dir);
    // At most the model's rows: a model may pad its embedding past its tokenizer's ids (Qwen2.5).
    LLM_REQUIRE(meta.vocab_size <= model.vocab_size, "import: the data in '", cmd.data_dir,
                "' has vocab ", meta.vocab_size, " but the model's config.json has vocab_size ",
                model.vocab_size,
                " (prepare the data with the model's tokenizer: prepare "
                "--tokenizer hf:",
                cmd.from, ")");
    import_require_data_tokenizer(cmd.from, cmd.data_dir, meta);
    cfg.data.dir = cmd.data_dir;
    // The tokenizer is the model's (just compared): recorded before the data is resolved, which
    // accepts a smaller vocab only for the tokenizer the run records.
    cfg.data.tokenizer_id = data_tokenizer_id(cmd.data_dir, meta);
    run_resolve_data(&cfg);  // the data as a whole (shards, tokenizer); records tokenizer_id
  }
  return cfg;
}

void write_weights(const std::string& path, const ParamTable& table, const std::vector<float>& host,
                   const std::string& source) {
  SafeTensorsWriter w;
  for (const ParamInfo& p : table.params)
    w.add(p.name, DType::kF32, p.shape, host.data() + p.offset);
  // The metadata of the weights a training run saves (ModelState::save_weights), and the source.
  w.set_metadata("format", "ledgerlm-weights");
  w.set_metadata("format_version", "1");
  w.set_metadata("imported_from", source);
  w.write_atomic(path);
}

}  // namespace

int command_import(const ImportCommand& cmd) {
  LLM_REQUIRE(cmd.format == "hf", "import --format ", cmd.format,
              ": expected hf (Hugging Face GPT-2, Llama or Qwen2)");
  std::string out_dir = cmd.out_dir;  // "runs/x/" is the run runs/x
  while (out_dir.size() > 1 && out_dir.back() == '/') out_dir.pop_back();
  LLM_REQUIRE(!out_dir.empty(), "import: --out is required");
  LLM_REQUIRE(!fs::exists(out_dir), "import: --out '", out_dir,
              "' already exists (choose a new run directory)");

  // Read and check everything before anything is created.
  const HfModel hf = hf_read_model_dir(cmd.from);
  const RunConfig cfg = import_config(cmd, out_dir, hf.config);
  const ParamTable table = param_table_for_run(cfg, 1);
  std::vector<float> host(static_cast<size_t>(table.total), 0.0f);
  hf_model_to_params(hf, table, Tensor(host.data(), DType::kF32));

  fs::path out(out_dir);
  std::error_code ec;
  if (out.has_parent_path()) fs::create_directories(out.parent_path(), ec);
  LLM_REQUIRE(!ec, "import: cannot create '", out.parent_path().string(), "': ", ec.message());
  const std::string tmp = out_dir + ".tmp" + std::to_string(static_cast<long long>(::getpid()));
  fs::remove_all(tmp);
  fs::create_directories(tmp, ec);
  LLM_REQUIRE(!ec, "import: cannot create '", tmp, "': ", ec.message());
  try {
    write_weights(tmp + "/model.safetensors", table, host,
                  fs::absolute(cmd.from).lexically_normal().string());
    run_write_config(tmp, cfg, "ledgerlm import");
    if (!cfg.data.dir.empty()) run_tokenizer_save(tmp, cfg.data.dir);
    fs::rename(tmp, out_dir, ec);
    LLM_REQUIRE(!ec, "import: cannot rename '", tmp, "' to '", out_dir, "': ", ec.message());
  } catch (...) {
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }

  for (const std::string& note : hf.notes) std::printf("%s\n", note.c_str());
  const ModelConfig& m = cfg.model;
  std::printf(
      "imported %s (%lld parameters: %lld layers, %lld heads, n_embd %lld, context %lld, vocab "
      "%lld padded to %lld) as run %s: config.toml, model.safetensors\n",
      cmd.from.c_str(), static_cast<long long>(table.num_params), static_cast<long long>(m.n_layer),
      static_cast<long long>(m.n_head), static_cast<long long>(m.n_embd),
      static_cast<long long>(m.block_size), static_cast<long long>(m.vocab_size),
      static_cast<long long>(m.padded_vocab()), out_dir.c_str());
  if (cmd.data_dir.empty())
    std::printf(
        "no data attached: export and train --init-from work now; eval and sample need "
        "--data (a directory prepared with the model's tokenizer)\n");
  return 0;
}

}  // namespace ledgerlm
