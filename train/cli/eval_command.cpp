// `ledgerlm eval`: loss per token and bits per byte of a trained run on a split or a text file.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "data/loader.h"
#include "data/shard.h"
#include "model/backends/backend_factory.h"
#include "model/base/check.h"
#include "model/base/input_file.h"
#include "model/gpt.h"
#include "train/cli/commands.h"
#include "train/run/evaluator.h"
#include "train/run/loaded_run.h"

namespace ledgerlm {

int command_eval(const EvalCommand& cmd) {
  LLM_REQUIRE(cmd.split == "val" || cmd.split == "train" || cmd.split == "test",
              "--split: expected val, train or test (got '", cmd.split, "')");
  LLM_REQUIRE(cmd.batch > 0, "--batch: expected > 0");
  auto backend = backend_create(backend_resolve(cmd.device), {static_cast<int>(cmd.threads), 0});
  LoadedRun run = run_load(cmd.run_dir, *backend);
  const int64_t T = run.config.train.seq_len;
  TokenArray tokens;
  double tokens_per_byte = 0.0;
  std::string what;
  if (!cmd.text_file.empty()) {
    const int fd = input_file_open(cmd.text_file, "--text file");
    LLM_REQUIRE(fd >= 0, "--text: cannot read '", cmd.text_file, "' (", errno_text(), ")");
    std::string text = input_file_read_fd(fd, cmd.text_file, "--text file");
    LLM_REQUIRE(!text.empty(), "--text: '", cmd.text_file, "' is empty");
    std::vector<int32_t> ids = run.tokenizer->encode(text);
    tokens = token_array_make(ids, run.meta.vocab_size, &backend->tracker());
    tokens_per_byte = static_cast<double>(ids.size()) / static_cast<double>(text.size());
    what = cmd.text_file;
  } else {
    // A split is read from the data directory itself (the run keeps only its tokenizer).
    const DataMeta data = run_load_data(run);
    // The test split exists only in a directory prepared with --test-fraction; the trainer
    // never reads it, so this is the one place its tokens are used.
    LLM_REQUIRE(cmd.split != "test" || data.has_test, "data dir '", run.config.data.dir,
                "' has no test split (prepare it with --test-fraction)");
    const DataSplitInfo& s = cmd.split == "val"    ? data.val
                             : cmd.split == "test" ? data.test
                                                   : data.train;
    LLM_REQUIRE(s.tokens > 0, "the ", cmd.split, " split of '", run.config.data.dir, "' is empty (",
                cmd.split == "test" ? "prepared with a --test-fraction too small for its documents?"
                                    : "prepared with --val-fraction 0?",
                "): use --split train or --text FILE");
    const std::string path = run.config.data.dir + "/" + cmd.split + ".bin";
    tokens = shard_load(path, &backend->tracker(), data.vocab_size);
    tokens_per_byte =
        static_cast<double>(s.tokens) / static_cast<double>(std::max<int64_t>(s.bytes, 1));
    what = path;
  }
  std::vector<int64_t> starts = evenly_spaced_windows(tokens.size(), T, cmd.max_windows);
  LLM_REQUIRE(!starts.empty(), "'", what, "' has ", tokens.size(),
              " tokens, fewer than seq_len + 1 = ", T + 1);
  GptModel model(run.config.model, run.table, *backend, DType::kF32, DType::kF32);
  // The run's GEMM input precision, as the training-time eval used it.
  model.set_bf16_matmul(run.config.precision.matmul == "bf16");
  model.set_tf32_matmul(run.config.precision.matmul == "tf32");
  EvalResult r =
      evaluate_windows(model, run.params_tensor(), tokens, starts, T, cmd.batch, tokens_per_byte);
  std::printf("eval %s on %s: %lld tokens in %zu windows of %lld\n", cmd.run_dir.c_str(),
              what.c_str(), static_cast<long long>(r.tokens), starts.size(),
              static_cast<long long>(T));
  std::printf("loss %.6f nats/token | perplexity %.3f | %.4f bits/byte\n", r.loss, r.perplexity,
              r.bpb);
  return 0;
}

}  // namespace ledgerlm
