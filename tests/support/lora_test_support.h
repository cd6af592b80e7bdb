// Shared by the LoRA tests (reference and model tests): the parameter tables a LoRA model is
// checked with, built one way for all of them.
#pragma once

#include "model/model_config.h"
#include "model/param_table.h"

namespace ledgerlm::testing {

// `full`: the table of `config` (base weights and adapters); `trained` and `frozen`: its trained
// part (the adapters) and its frozen part (the base weights); `plain` / `plain_config`: the same
// model without adapters, whose weights the frozen part holds.
struct LoraTables {
  ParamTable full, trained, frozen, plain;
  ModelConfig plain_config;
};

inline LoraTables lora_tables(const ModelConfig& config) {
  LoraTables t;
  t.full = param_table_build(config);
  t.trained = param_table_part(t.full, true, t.full.options);
  t.frozen = param_table_part(t.full, false, t.full.options);
  t.plain_config = config;
  t.plain_config.lora = LoraConfig();
  t.plain = param_table_build(t.plain_config);
  return t;
}

}  // namespace ledgerlm::testing
