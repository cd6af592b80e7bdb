// Validation of the [model] section.
#include "model/model_config.h"

#include "model/base/check.h"

namespace ledgerlm {

const char* recompute_name(Recompute r) {
  switch (r) {
    case Recompute::kNone:
      return "none";
    case Recompute::kMlp:
      return "mlp";
    case Recompute::kBlock:
      return "block";
  }
  return "?";
}

Recompute recompute_parse(const std::string& text) {
  if (text == "none") return Recompute::kNone;
  if (text == "mlp") return Recompute::kMlp;
  if (text == "block") return Recompute::kBlock;
  fail("model.recompute: expected none, mlp or block (got '" + text + "')");
}

void ModelConfig::validate() const {
  LLM_REQUIRE(vocab_size > 0, "model.vocab_size: expected > 0 (got ", vocab_size, ")");
  LLM_REQUIRE(n_layer > 0, "model.n_layer: expected > 0 (got ", n_layer, ")");
  LLM_REQUIRE(n_head > 0, "model.n_head: expected > 0 (got ", n_head, ")");
  LLM_REQUIRE(n_embd > 0 && n_embd % n_head == 0,
              "model.n_embd: expected a positive multiple of model.n_head=", n_head, " (got ",
              n_embd, ")");
  LLM_REQUIRE(block_size > 0, "model.block_size: expected > 0 (got ", block_size, ")");
  LLM_REQUIRE(dropout >= 0.0 && dropout < 1.0, "model.dropout: expected in [0, 1) (got ", dropout,
              ")");
  recompute_parse(recompute);
}

}  // namespace ledgerlm
