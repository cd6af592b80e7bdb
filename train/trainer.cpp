// `ledgerlm train`: the training loop in DESIGN.md's fixed order, with evaluation, metrics,
// progress lines and weight saves.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/shard.h"
#include "model/base/check.h"
#include "optim/schedule.h"
#include "train/commands.h"
#include "train/evaluator.h"
#include "train/ledger.h"
#include "train/metrics.h"
#include "train/model_state.h"
#include "train/run_dir.h"

namespace ledgerlm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Steps the schedule decays over: from max_steps, else from the token budget; a wall-clock-only
// budget is extrapolated from the pace so far (documented in the README).
int64_t schedule_total_steps(const TrainConfig& t, int64_t tokens_per_step, int64_t step,
                             double elapsed) {
  if (t.max_steps > 0) return t.max_steps;
  if (t.max_tokens > 0) return (t.max_tokens + tokens_per_step - 1) / tokens_per_step;
  if (step <= 1 || elapsed <= 0) return std::max<int64_t>(step, 1000000);
  return std::max<int64_t>(step, static_cast<int64_t>(step * t.max_seconds / elapsed));
}

}  // namespace

int command_train(TrainCommand& cmd) {
  RunConfig& cfg = cmd.run;
  DataMeta meta = run_resolve_data(&cfg);
  cfg.validate();
  LLM_REQUIRE(cfg.train.device == "cpu", "train.device = ", cfg.train.device,
              ": this build trains on the cpu only");
  LLM_REQUIRE(cfg.dist.zero == 0, "dist.zero = ", cfg.dist.zero,
              ": sharding needs several ranks (mpirun); a single process uses dist.zero = 0");
  LLM_REQUIRE(cmd.resume.empty(), "--resume: checkpoints are not available in this build yet");
  const std::string run_dir = run_dir_prepare(cfg, cfg.train.overwrite);
  std::filesystem::remove(run_dir + "/metrics.jsonl");
  run_write_config(run_dir, cfg);

  auto backend = backend_create_cpu(static_cast<int>(cfg.train.threads));
  const int64_t B = cfg.train.micro_batch, T = cfg.train.seq_len, A = cfg.train.accum;
  const int world = 1, rank = 0;
  LoaderConfig lc;
  lc.seq = T;
  lc.micro_batch = B;
  lc.accum = A;
  lc.world = world;
  lc.rank = rank;
  lc.seed = static_cast<uint64_t>(cfg.train.seed);
  DataLoader loader(cfg.data.dir, lc, &backend->tracker());
  const TokenArray& val_tokens = loader.val_tokens();

  ModelState state(cfg, *backend);
  if (!cmd.init_from.empty()) {
    std::string path = cmd.init_from;
    if (std::filesystem::is_directory(path)) path += "/model.safetensors";
    state.load_weights(path);
  } else {
    state.init_weights(static_cast<uint64_t>(cfg.train.seed));
  }
  GptModel& model = state.model();
  model.plan(B, T);

  const int64_t tokens_per_step = static_cast<int64_t>(world) * B * A * T;
  const double tokens_per_byte =
      meta.val.bytes > 0 ? static_cast<double>(meta.val.tokens) / static_cast<double>(meta.val.bytes) : 0.0;
  std::vector<int64_t> val_starts = loader.val_windows(T, cfg.train.eval_windows);

  std::printf("ledgerlm train: run %s | %s params | L%lld H%lld C%lld T%lld | vocab %lld (padded %lld)\n",
              run_dir.c_str(), format_count(static_cast<double>(state.table().num_params)).c_str(),
              static_cast<long long>(cfg.model.n_layer), static_cast<long long>(cfg.model.n_head),
              static_cast<long long>(cfg.model.n_embd), static_cast<long long>(T),
              static_cast<long long>(cfg.model.vocab_size),
              static_cast<long long>(cfg.model.padded_vocab()));
  std::printf("global batch = world %d x micro-batch %lld x accumulation %lld = %lld sequences = %lld tokens per step\n",
              world, static_cast<long long>(B), static_cast<long long>(A),
              static_cast<long long>(world * B * A), static_cast<long long>(tokens_per_step));
  std::printf("optimizer %s (impl %s), lr %g, schedule %s, precision params %s grads %s master %s, %d threads\n",
              cfg.optim.name.c_str(), cfg.optim.impl.c_str(), cfg.optim.lr, cfg.optim.schedule.c_str(),
              dtype_name(state.plan().params), dtype_name(state.plan().grads),
              state.plan().separate_master ? "fp32" : (state.plan().master_none ? "none" : "fp32 (= params)"),
              backend->num_threads());
  RunLedger ledger(cfg, state, world, rank);
  ledger.print_prediction();
  std::fflush(stdout);

  MetricsLog log(run_dir + "/metrics.jsonl");
  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(inputs.size());
  const auto t_start = Clock::now();
  double train_seconds = 0.0;
  int64_t tokens_seen = 0, step = 0;
  double best_val = INFINITY, best_bpb = INFINITY, last_val = NAN;
  int64_t skipped_total = 0;

  auto run_eval = [&](int64_t at_step) {
    EvalResult ev = evaluate_windows(model, state.params(), val_tokens, val_starts, T, B, tokens_per_byte);
    last_val = ev.loss;
    if (ev.loss < best_val) {
      best_val = ev.loss;
      best_bpb = ev.bpb;
    }
    nlohmann::json rec = {{"step", at_step},         {"tokens", tokens_seen},
                          {"wall_s", seconds_since(t_start)}, {"val_loss", ev.loss},
                          {"val_bpb", ev.bpb},       {"val_ppl", ev.perplexity},
                          {"val_tokens", ev.tokens}};
    log.write(rec);
    std::printf("eval  step %lld | val loss %.4f | val bpb %.4f | ppl %.2f | tokens %s\n",
                static_cast<long long>(at_step), ev.loss, ev.bpb, ev.perplexity,
                format_count(static_cast<double>(tokens_seen)).c_str());
    std::fflush(stdout);
  };

  while (true) {
    const double elapsed = train_seconds;
    bool done = (cfg.train.max_steps > 0 && step >= cfg.train.max_steps) ||
                (cfg.train.max_tokens > 0 && tokens_seen >= cfg.train.max_tokens) ||
                (cfg.train.max_seconds > 0 && elapsed >= cfg.train.max_seconds);
    if (done) break;
    ++step;
    const auto t0 = Clock::now();
    state.zero_grads();
    double loss_sum = 0.0;
    const double loss_scale = state.loss_scale();
    for (int64_t m = 0; m < A; ++m) {
      loader.batch_at(step - 1, m, inputs.data(), targets.data());
      ForwardOptions fo;
      fo.training = true;
      fo.seed = static_cast<uint64_t>(cfg.train.seed);
      fo.site = static_cast<uint64_t>((step - 1) * A + m) * static_cast<uint64_t>(world) + rank;
      loss_sum += model.forward(state.params(), inputs.data(), targets.data(), B, T, fo);
      model.backward(state.params(), state.grads(), loss_scale / static_cast<double>(A));
    }
    const double loss = loss_sum / static_cast<double>(A);
    if (!std::isfinite(loss) && !state.plan().scaler_on)
      fail(error_message("non-finite loss (", loss, ") at step ", step,
                         ": training diverged (try a lower optim.lr or precision.params = fp32)"));
    const int64_t total_steps = schedule_total_steps(cfg.train, tokens_per_step, step, elapsed);
    const double lr = schedule_lr(cfg.optim, step, total_steps);
    StepStats st = state.optimizer_step(step, lr);
    if (st.skipped) {
      ++skipped_total;
      LLM_REQUIRE(state.plan().scaler_on, "non-finite gradients at step ", step,
                  ": training diverged (try a lower optim.lr)");
      LLM_REQUIRE(state.scaler().state().consecutive_skips < cfg.precision.max_consecutive_skips,
                  "fp16: ", state.scaler().state().consecutive_skips,
                  " consecutive steps with non-finite gradients at step ", step,
                  " (loss scale ", state.scaler().scale(), "): stopping");
    }
    tokens_seen += tokens_per_step;
    const double step_s = seconds_since(t0);
    train_seconds += step_s;
    const double tps = static_cast<double>(tokens_per_step) / step_s;

    nlohmann::json rec = {{"step", step},
                          {"tokens", tokens_seen},
                          {"wall_s", seconds_since(t_start)},
                          {"train_s", train_seconds},
                          {"loss", loss},
                          {"lr", lr},
                          {"grad_norm", st.grad_norm},
                          {"tokens_per_s", tps},
                          {"step_ms", step_s * 1e3},
                          {"optim_ms", st.optim_ms},
                          {"comm_ms", 0.0},
                          {"loss_scale", state.loss_scale()},
                          {"skipped_steps", skipped_total}};
    const bool last = (cfg.train.max_steps > 0 && step >= cfg.train.max_steps) ||
                      (cfg.train.max_tokens > 0 && tokens_seen >= cfg.train.max_tokens) ||
                      (cfg.train.max_seconds > 0 && train_seconds >= cfg.train.max_seconds);
    if (step % cfg.train.log_interval == 0 || step == 1 || last) ledger.add_measured(&rec);
    log.write(rec);
    if (step % cfg.train.log_interval == 0 || step == 1 || last) {
      double frac = 0.0;
      if (cfg.train.max_steps > 0) frac = std::max(frac, static_cast<double>(step) / cfg.train.max_steps);
      if (cfg.train.max_tokens > 0)
        frac = std::max(frac, static_cast<double>(tokens_seen) / cfg.train.max_tokens);
      if (cfg.train.max_seconds > 0) frac = std::max(frac, train_seconds / cfg.train.max_seconds);
      double eta = frac > 0 ? train_seconds * (1.0 - frac) / frac : NAN;
      std::printf("step %lld/%lld | loss %.4f | val %s | lr %.2e | norm %.3f | %s tok/s | %.0f ms | ETA %s%s\n",
                  static_cast<long long>(step), static_cast<long long>(total_steps), loss,
                  std::isnan(last_val) ? "-" : std::to_string(last_val).substr(0, 6).c_str(), lr,
                  st.grad_norm, format_count(tps).c_str(), step_s * 1e3, format_duration(eta).c_str(),
                  st.skipped ? " | SKIPPED (overflow)" : "");
      std::fflush(stdout);
    }
    if ((cfg.train.eval_interval > 0 && step % cfg.train.eval_interval == 0) || last) run_eval(step);
    if (cfg.train.save_interval > 0 && step % cfg.train.save_interval == 0 && !last)
      state.save_weights(run_dir + "/model.safetensors");
  }
  if (step == 0) run_eval(0);
  state.save_weights(run_dir + "/model.safetensors");
  const double wall = seconds_since(t_start);
  nlohmann::json summary = {{"summary", true},
                            {"steps", step},
                            {"tokens", tokens_seen},
                            {"wall_s", wall},
                            {"train_s", train_seconds},
                            {"mean_tokens_per_s", tokens_seen / std::max(train_seconds, 1e-9)},
                            {"best_val_loss", best_val},
                            {"best_val_bpb", best_bpb},
                            {"skipped_steps", skipped_total}};
  ledger.add_measured(&summary);
  log.write(summary);
  ledger.finish(run_dir);
  std::printf("done: %lld steps, %s tokens in %s (%s tok/s) | best val loss %.4f, bpb %.4f | weights %s/model.safetensors\n",
              static_cast<long long>(step), format_count(static_cast<double>(tokens_seen)).c_str(),
              format_duration(wall).c_str(),
              format_count(tokens_seen / std::max(train_seconds, 1e-9)).c_str(), best_val, best_bpb,
              run_dir.c_str());
  return 0;
}

}  // namespace ledgerlm
