// A trained run loaded for inference (eval, sample, export): its resolved config, data meta,
// tokenizer, parameter table and fp32 weights.
#pragma once

#include <memory>
#include <string>

#include "data/meta.h"
#include "data/tokenizer.h"
#include "model/backend/backend.h"
#include "model/param_table.h"
#include "train/config/run_config.h"

namespace ledgerlm {

struct LoadedRun {
  std::string dir;
  RunConfig config;
  DataMeta meta;
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_dir;  // where `tokenizer` and `meta` were read: RUN/tokenizer or data.dir
  ParamTable table;
  Buffer params;  // fp32, laid out by table, in the backend's memory
  Tensor params_tensor() const { return Tensor(params.data(), DType::kF32); }
};

// Loads runs/NAME: config.toml, the tokenizer and its meta.json (the run's copy in
// runs/NAME/tokenizer, else the data directory's), model.safetensors. A LoRA
// run's adapters are merged into their base weights: `config` and `table` are then the plain
// model's (no [lora], nothing frozen). A missing run, missing weights, a run without data
// (imported without --data), a vocab mismatch, a tensor that fails its checksum or a non-finite
// weight is one clear error.
LoadedRun run_load(const std::string& run_dir, Backend& backend);

// The model alone: config.toml and model.safetensors; `meta` and `tokenizer` stay empty. What
// needs no text (export of an imported run that has no data attached, tests of the weights).
LoadedRun run_load_model(const std::string& run_dir, Backend& backend);

// The meta.json of the run's data directory (data.dir), checked like run_load checks the
// tokenizer: what reading a split needs. A missing directory is one error saying so.
DataMeta run_load_data(const LoadedRun& run);

// Whether the run has a tokenizer to load: its own copy, or a data directory attached.
bool run_has_tokenizer(const std::string& run_dir);

}  // namespace ledgerlm
