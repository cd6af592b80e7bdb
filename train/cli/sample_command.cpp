// `ledgerlm sample`: text from a trained run, decoded with a KV cache (or without, to check).
#include <cmath>
#include <cstdio>
#include <vector>

#include "model/backends/backend_factory.h"
#include "model/base/check.h"
#include "model/gpt.h"
#include "model/gpt_decode.h"
#include "train/cli/commands.h"
#include "train/run/loaded_run.h"
#include "train/run/sampling.h"

namespace ledgerlm {

int command_sample(const SampleCommand& cmd) {
  // Non-finite or negative parameters would sample from NaN probabilities (garbage tokens,
  // invalid UTF-8): refuse them.
  LLM_REQUIRE(cmd.tokens >= 0, "--tokens: expected >= 0 (got ", cmd.tokens, ")");
  LLM_REQUIRE(std::isfinite(cmd.temperature) && cmd.temperature >= 0,
              "--temperature: expected a finite number >= 0 (got ", cmd.temperature, ")");
  LLM_REQUIRE(cmd.top_k >= 0, "--top-k: expected >= 0 (got ", cmd.top_k, ")");
  LLM_REQUIRE(std::isfinite(cmd.top_p) && cmd.top_p > 0 && cmd.top_p <= 1,
              "--top-p: expected a number in (0, 1] (got ", cmd.top_p, ")");
  auto backend = backend_create(backend_resolve(cmd.device), {static_cast<int>(cmd.threads), 0});
  LoadedRun run = run_load(cmd.run_dir, *backend);
  const ModelConfig& mc = run.config.model;
  std::vector<int32_t> ids = tokenizer_prompt_ids(*run.tokenizer, cmd.prompt);
  const size_t prompt_len = ids.size();
  SamplingOptions so;
  so.temperature = cmd.temperature;
  so.top_k = cmd.top_k;
  so.top_p = cmd.top_p;
  so.seed = static_cast<uint64_t>(cmd.seed);

  GptDecoder decoder(mc, run.table, *backend, run.params_tensor());
  GptModel model(mc, run.table, *backend, DType::kF32, DType::kF32);
  const float* logits = nullptr;
  std::vector<float> row(static_cast<size_t>(mc.padded_vocab()));
  for (int64_t n = 0; n < cmd.tokens; ++n) {
    // Context: the last block_size tokens. The cache is rebuilt only when the window slides.
    const int64_t ctx = std::min<int64_t>(static_cast<int64_t>(ids.size()), mc.block_size);
    const int32_t* window = ids.data() + ids.size() - ctx;
    if (cmd.no_cache) {
      model.forward(run.params_tensor(), window, nullptr, 1, ctx, ForwardOptions{false, 0, 0});
      // Only the last position's logits come back to the host.
      backend->copy_to_host(row.data(), model.logits().offset((ctx - 1) * mc.padded_vocab()),
                            mc.padded_vocab());
      logits = row.data();
    } else {
      if (decoder.length() == 0 || decoder.length() != ctx - 1 ||
          static_cast<int64_t>(ids.size()) > mc.block_size) {
        decoder.reset();
        for (int64_t i = 0; i < ctx; ++i) logits = decoder.step(window[i]);
      } else {
        logits = decoder.step(window[ctx - 1]);
      }
    }
    // The tokenizer's ids only: a model may have more embedding rows than its tokenizer has ids
    // (Qwen2.5 pads them), and those rows decode to nothing.
    ids.push_back(sample_token(logits, run.meta.vocab_size, so, static_cast<uint64_t>(n)));
  }
  std::string text = run.tokenizer->decode(
      std::vector<int32_t>(ids.begin() + static_cast<long>(prompt_len), ids.end()));
  std::printf("%s%s\n", cmd.prompt.c_str(), text.c_str());
  return 0;
}

}  // namespace ledgerlm
