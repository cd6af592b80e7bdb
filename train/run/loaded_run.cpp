// Loading a trained run (see loaded_run.h).
#include "train/run/loaded_run.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>

#include "ckpt/finite_weights.h"
#include "ckpt/safetensors.h"
#include "data/data_check.h"
#include "model/base/check.h"
#include "model/lora_merge.h"
#include "train/run/run_dir.h"
#include "train/run/run_tokenizer.h"
#include "train/step/placement.h"

namespace ledgerlm {

LoadedRun run_load_model(const std::string& run_dir, Backend& backend) {
  LLM_REQUIRE(std::filesystem::is_directory(run_dir), "run '", run_dir, "' does not exist");
  LoadedRun run;
  run.dir = run_dir;
  run.config = run_load_config(run_dir);
  // Inference runs the plain GPT-2: adapters are folded into their base weights (lora_merge.h),
  // frozen or not makes no difference.
  const LoraConfig lora = run.config.model.lora;
  run.config.model.lora = LoraConfig();
  run.config.train.freeze.clear();
  run.table = param_table_for_run(run.config, 1);
  std::string weights = run_dir + "/model.safetensors";
  LLM_REQUIRE(std::filesystem::exists(weights), "run '", run_dir,
              "': no model.safetensors (did the training finish?)");
  SafeTensorsFile f = SafeTensorsFile::open(weights);
  run.params =
      backend.allocate(MemTag::kParams, static_cast<size_t>(run.table.total) * sizeof(float));
  // Each tensor read is verified against its checksum (SafeTensorsFile) and must be finite.
  const std::string where = "run '" + run_dir + "': model.safetensors";
  auto read = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const SafeTensorInfo& info = f.get(name);
    LLM_REQUIRE(info.shape == shape, "weights file '", weights, "': tensor '", name, "' has shape ",
                safetensors_shape_string(info.shape), ", expected ",
                safetensors_shape_string(shape));
    std::vector<float> v = f.read_f32(name);
    require_finite_weights(where, name, shape, v);
    return v;
  };
  // The table with the adapters: each factor A (followed by its B) names its base weight and the
  // rows it adapts (q, k and v's own adapters each a row block of the fused qkv weight).
  ParamTable adapted;
  if (lora.enabled()) {
    ModelConfig m = run.config.model;
    m.lora = lora;
    adapted = param_table_build(m);
  }
  for (const auto& p : run.table.params) {
    std::vector<float> v = read(p.name, p.shape);
    bool merged = false;
    const int base = lora.enabled() ? adapted.index_of(p.name) : -1;
    for (size_t i = 0; base >= 0 && i + 1 < adapted.params.size(); ++i) {
      const ParamInfo& a = adapted.params[i];
      // Every adapter the table names must be in the file (read() refuses a missing one): a
      // skipped adapter would evaluate and export the base model in silence.
      if (a.lora != ParamInfo::Lora::kA || a.lora_base != base) continue;
      const ParamInfo& b = adapted.params[i + 1];
      const int64_t in = p.shape[1], r = lora.rank, rows = b.shape[0];
      const std::vector<float> fa = read(a.name, {r, in}), fb = read(b.name, {rows, r});
      if (rows == p.shape[0]) {
        lora_merge(&v, fa, fb, rows, in, r, lora.scale());
      } else {  // a row block: merged on its own, element by element as the whole would be
        const auto first = v.begin() + a.lora_row0 * in;
        std::vector<float> block(first, first + rows * in);
        lora_merge(&block, fa, fb, rows, in, r, lora.scale());
        std::copy(block.begin(), block.end(), first);
      }
      merged = true;
    }
    if (merged) require_finite_weights(where + " (its LoRA adapters merged)", p.name, p.shape, v);
    backend.copy_from_host(run.params_tensor().offset(p.offset), v.data(), p.numel);
  }
  return run;
}

namespace {

// The tokenizer in `dir` (the run's copy or its data directory) with its meta.json, checked
// against the run's vocab and the tokenizer it was trained with.
void load_tokenizer(const std::string& run_dir, const RunConfig& config, const std::string& dir,
                    DataMeta* meta, std::unique_ptr<Tokenizer>* tokenizer) {
  *meta = meta_read(dir);
  const std::string& trained_with = config.data.tokenizer_id;  // "" in runs made before it
  // Fewer ids than the model has rows: the padded embedding of an imported model (Qwen2.5), with
  // the tokenizer the run records (checked below).
  LLM_REQUIRE(meta->vocab_size == config.model.vocab_size ||
                  (meta->vocab_size < config.model.vocab_size && !trained_with.empty()),
              "run '", run_dir, "': its model has vocab ", config.model.vocab_size,
              " but the tokenizer in '", dir, "' has vocab ", meta->vocab_size);
  *tokenizer = tokenizer_load(dir);
  if (!trained_with.empty()) {
    const std::string now = data_tokenizer_id(dir, *meta);
    LLM_REQUIRE(now == trained_with, "run '", run_dir, "' was trained with tokenizer ",
                trained_with, " but '", dir, "' now has ", now, " (the tokenizer was replaced)");
  }
}

}  // namespace

LoadedRun run_load(const std::string& run_dir, Backend& backend) {
  LLM_REQUIRE(std::filesystem::is_directory(run_dir), "run '", run_dir, "' does not exist");
  // The tokenizer is checked before the weights are read: its errors are the likelier ones. The
  // run's own copy first; runs without one (older runs, imports) read their data directory.
  const RunConfig config = run_load_config(run_dir);
  std::string tokenizer_dir = run_tokenizer_dir(run_dir);
  if (tokenizer_dir.empty()) {
    LLM_REQUIRE(!config.data.dir.empty(), "run '", run_dir,
                "' has no data attached (data.dir is empty: imported without --data); import it "
                "again with --data DIR, or set data.dir in its config.toml to a directory "
                "prepared with the model's tokenizer");
    tokenizer_dir = config.data.dir;
  }
  DataMeta meta;
  std::unique_ptr<Tokenizer> tokenizer;
  load_tokenizer(run_dir, config, tokenizer_dir, &meta, &tokenizer);
  LoadedRun run = run_load_model(run_dir, backend);
  run.meta = std::move(meta);
  run.tokenizer = std::move(tokenizer);
  run.tokenizer_dir = tokenizer_dir;
  return run;
}

DataMeta run_load_data(const LoadedRun& run) {
  const std::string& dir = run.config.data.dir;
  std::error_code ec;
  LLM_REQUIRE(!dir.empty() && std::filesystem::is_directory(dir, ec), "run '", run.dir,
              "': its data directory '", dir,
              "' does not exist (moved or removed?); a split is read from the data: set data.dir "
              "in the run's config.toml to where the data is now, or evaluate a file with --text "
              "FILE, which needs the run alone");
  DataMeta meta;
  std::unique_ptr<Tokenizer> tokenizer;
  load_tokenizer(run.dir, run.config, dir, &meta, &tokenizer);
  return meta;
}

bool run_has_tokenizer(const std::string& run_dir) {
  return !run_tokenizer_dir(run_dir).empty() || !run_load_config(run_dir).data.dir.empty();
}

}  // namespace ledgerlm
