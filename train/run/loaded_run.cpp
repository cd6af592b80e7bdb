// Loading a trained run (see loaded_run.h).
#include "train/run/loaded_run.h"

#include <filesystem>

#include "ckpt/safetensors.h"
#include "data/data_check.h"
#include "model/base/check.h"
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
  run.table = param_table_for_run(run.config, 1);
  std::string weights = run_dir + "/model.safetensors";
  LLM_REQUIRE(std::filesystem::exists(weights), "run '", run_dir,
              "': no model.safetensors (did the training finish?)");
  SafeTensorsFile f = SafeTensorsFile::open(weights);
  run.params =
      backend.allocate(MemTag::kParams, static_cast<size_t>(run.table.total) * sizeof(float));
  for (const auto& p : run.table.params) {
    const SafeTensorInfo& info = f.get(p.name);
    LLM_REQUIRE(info.shape == p.shape, "weights file '", weights, "': tensor '", p.name,
                "' has shape ", safetensors_shape_string(info.shape), ", expected ",
                safetensors_shape_string(p.shape));
    std::vector<float> v = f.read_f32(p.name);
    backend.copy_from_host(run.params_tensor().offset(p.offset), v.data(), p.numel);
  }
  return run;
}

}  // namespace ledgerlm
