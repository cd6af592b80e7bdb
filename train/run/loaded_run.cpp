// Loading a trained run (see loaded_run.h).
#include "train/run/loaded_run.h"

#include <filesystem>

#include "ckpt/safetensors.h"
#include "data/data_check.h"
#include "model/base/check.h"
#include "model/lora_merge.h"
#include "train/run/run_dir.h"
#include "train/step/placement.h"

namespace ledgerlm {

LoadedRun run_load(const std::string& run_dir, Backend& backend) {
  LLM_REQUIRE(std::filesystem::is_directory(run_dir), "run '", run_dir, "' does not exist");
  LoadedRun run;
  run.dir = run_dir;
  run.config = run_load_config(run_dir);
  run.meta = meta_read(run.config.data.dir);
  LLM_REQUIRE(run.meta.vocab_size == run.config.model.vocab_size, "run '", run_dir,
              "': its model has vocab ", run.config.model.vocab_size, " but the data in '",
              run.config.data.dir, "' has vocab ", run.meta.vocab_size);
  run.tokenizer = tokenizer_load(run.config.data.dir);
  const std::string& trained_with = run.config.data.tokenizer_id;  // "" in runs made before it
  if (!trained_with.empty()) {
    const std::string now = data_tokenizer_id(run.config.data.dir, run.meta);
    LLM_REQUIRE(now == trained_with, "run '", run_dir, "' was trained with tokenizer ",
                trained_with, " but the data in '", run.config.data.dir, "' now has ", now,
                " (the tokenizer was replaced)");
  }
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
  auto read = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const SafeTensorInfo& info = f.get(name);
    LLM_REQUIRE(info.shape == shape, "weights file '", weights, "': tensor '", name, "' has shape ",
                safetensors_shape_string(info.shape), ", expected ",
                safetensors_shape_string(shape));
    return f.read_f32(name);
  };
  for (const auto& p : run.table.params) {
    std::vector<float> v = read(p.name, p.shape);
    const std::string stem = p.name.substr(0, p.name.size() - std::string(".weight").size());
    if (lora.enabled() && p.kind == ParamKind::kMatrix && f.find(stem + ".lora_a") != nullptr) {
      const int64_t out = p.shape[0], in = p.shape[1], r = lora.rank;
      lora_merge(&v, read(stem + ".lora_a", {r, in}), read(stem + ".lora_b", {out, r}), out, in, r,
                 lora.scale());
    }
    backend.copy_from_host(run.params_tensor().offset(p.offset), v.data(), p.numel);
  }
  return run;
}

}  // namespace ledgerlm
