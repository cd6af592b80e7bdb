// `ledgerlm train`: the training loop in DESIGN.md's fixed order, with evaluation, metrics,
// progress lines, weight saves, full checkpoints (ckpt/checkpoint.h), bit-exact resume and
// clean stopping (train/stop_signal.h).
//
// Resume is bit-exact because nothing random or scheduled carries hidden state: the data order,
// dropout and stochastic rounding are counter-based functions of (seed, step, micro-batch, ...),
// the LR is a function of the step, and everything else (weights, every optimizer state, the loss
// scaler, the counters) is in the checkpoint.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.h"
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
#include "train/stop_signal.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

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

// Counters of the loop that a checkpoint carries.
struct LoopState {
  int64_t step = 0;
  int64_t tokens = 0;
  double train_seconds = 0.0;
  int64_t skipped = 0;
  double best_val = INFINITY, best_bpb = INFINITY, last_val = NAN;
};

// JSON has no inf/nan: they travel as null.
json finite_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}
double number_or(const json& j, const char* key, double fallback) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>() : fallback;
}

const char* master_text(const PrecisionPlan& plan) {
  return plan.separate_master ? "fp32" : (plan.master_none ? "none" : "fp32 (= params)");
}

// Keys that define the architecture (or what the saved state means): refused on resume.
constexpr const char* kArchitectureKeys[] = {"model.vocab_size", "model.n_layer",    "model.n_head",
                                             "model.n_embd",     "model.block_size", "optim.name"};

json checkpoint_meta(const RunConfig& cfg, ModelState& state, const LoopState& ls,
                     const RunLedger& ledger, int world) {
  const PrecisionPlan& plan = state.plan();
  const LossScalerState& sc = state.scaler().state();
  json components = json::array();
  for (const StateComponent& c : state.optimizer().state_components())
    components.push_back({{"name", c.name}, {"dtype", dtype_name(c.dtype)}, {"bytes", c.bytes}});
  json ledger_rec = json::object();
  ledger.add_measured(&ledger_rec);
  RunConfig copy = cfg;
  return {
      {"trainer",
       {{"step", ls.step},
        {"tokens_seen", ls.tokens},
        {"train_seconds", ls.train_seconds},
        {"skipped_steps", ls.skipped},
        {"best_val_loss", finite_or_null(ls.best_val)},
        {"best_val_bpb", finite_or_null(ls.best_bpb)},
        {"last_val_loss", finite_or_null(ls.last_val)}}},
      {"data_loader",
       {{"step", ls.step},
        {"micro", 0},
        {"note", "the loader is a pure function of (seed, step, micro): nothing else to save"}}},
      {"rng",
       {{"seed", cfg.train.seed},
        {"note",
         "counter-based: init, data order, dropout and stochastic rounding are functions of "
         "(seed, step, micro-batch, layer, element); seed and step restore them"}}},
      {"schedule",
       {{"name", cfg.optim.schedule},
        {"step", ls.step},
        {"note", "the LR is a pure function of (config, step)"}}},
      {"loss_scaler",
       {{"enabled", plan.scaler_on},
        {"dynamic", plan.scaler_dynamic},
        {"scale", sc.scale},
        {"good_steps", sc.good_steps},
        {"skipped_steps", sc.skipped_steps},
        {"consecutive_skips", sc.consecutive_skips}}},
      {"model",
       {{"vocab_size", cfg.model.vocab_size},
        {"padded_vocab", cfg.model.padded_vocab()},
        {"n_layer", cfg.model.n_layer},
        {"n_head", cfg.model.n_head},
        {"n_embd", cfg.model.n_embd},
        {"block_size", cfg.model.block_size},
        {"num_params", state.table().num_params},
        {"compute_dtype", dtype_name(plan.params)},
        {"master", master_text(plan)},
        {"weights_note",
         "model.safetensors holds the fp32 master (compute.safetensors the compute copy, the "
         "master rounded to nearest), or the compute copy itself when master = none"}}},
      {"optimizer", {{"name", state.optimizer().name()}, {"components", components}}},
      {"layout",
       {{"world_size", world},
        {"zero_stage", cfg.dist.zero},
        {"block", state.table().options.block},
        {"flat_elements", state.table().total},
        {"note", "tensors are stored whole and unpadded; each rank writes its element ranges"}}},
      {"config", run_config_flat(cfg)},
      {"config_toml", config_to_toml(config_keys(copy))},
      {"ledger", ledger_rec.value("mem", json::object())}};
}

// Checks that `cfg` may continue the run saved in `ckpt`; returns the changed keys (logged).
// Config values as text quote strings; messages show them bare.
std::string unquote(const std::string& v) {
  return v.size() >= 2 && v.front() == '"' && v.back() == '"' ? v.substr(1, v.size() - 2) : v;
}

json resume_check_config(const CheckpointReader& ckpt, const RunConfig& cfg) {
  const json& saved = ckpt.meta().value("config", json::object());
  LLM_REQUIRE(saved.is_object() && !saved.empty(), "checkpoint file '", ckpt.dir(),
              "/meta.json': no saved config");
  json changed = json::object();
  for (const auto& [key, now] : run_config_flat(cfg)) {
    if (!saved.contains(key) || !saved[key].is_string()) continue;  // a key added since
    const std::string before = unquote(saved[key].get<std::string>());
    const std::string now_text = unquote(now);
    if (before == now_text) continue;
    for (const char* arch : kArchitectureKeys)
      LLM_REQUIRE(key != arch, "cannot resume from '", ckpt.dir(), "': ", key, " = ", now_text,
                  " but the checkpoint was saved with ", key, " = ", before,
                  " (the architecture and optimizer cannot change on resume; --init-from starts "
                  "a new run from the weights)");
    changed[key] = {{"from", before}, {"to", now_text}};
  }
  return changed;
}

void restore_loop_state(const CheckpointReader& ckpt, LoopState* ls) {
  const json& t = ckpt.meta().value("trainer", json::object());
  LLM_REQUIRE(t.is_object() && t.contains("step") && t.contains("tokens_seen"), "checkpoint file '",
              ckpt.dir(), "/meta.json': missing trainer state");
  ls->step = t["step"].get<int64_t>();
  LLM_REQUIRE(ls->step == ckpt.step(), "checkpoint file '", ckpt.dir(),
              "/meta.json': trainer step ", ls->step, " differs from the checkpoint step ",
              ckpt.step());
  ls->tokens = t["tokens_seen"].get<int64_t>();
  ls->train_seconds = number_or(t, "train_seconds", 0.0);
  ls->skipped = t.value("skipped_steps", static_cast<int64_t>(0));
  ls->best_val = number_or(t, "best_val_loss", INFINITY);
  ls->best_bpb = number_or(t, "best_val_bpb", INFINITY);
  ls->last_val = number_or(t, "last_val_loss", NAN);
}

void restore_scaler(const CheckpointReader& ckpt, ModelState& state) {
  const json& s = ckpt.meta().value("loss_scaler", json::object());
  if (!state.plan().scaler_on || !s.value("enabled", false)) return;  // nothing to carry over
  LossScalerState st;
  st.scale = number_or(s, "scale", 0.0);
  st.good_steps = s.value("good_steps", static_cast<int64_t>(0));
  st.skipped_steps = s.value("skipped_steps", static_cast<int64_t>(0));
  st.consecutive_skips = s.value("consecutive_skips", static_cast<int64_t>(0));
  state.scaler().load_state(st);
}

// --init-from: a weights file, a run directory (its model.safetensors) or a checkpoint.
void init_from(ModelState& state, const std::string& path) {
  LLM_REQUIRE(fs::exists(path), "--init-from: '", path, "' does not exist");
  if (fs::is_regular_file(path)) return state.load_weights(path);
  if (!fs::exists(fs::path(path) / "meta.json") && fs::exists(fs::path(path) / "model.safetensors"))
    return state.load_weights((fs::path(path) / "model.safetensors").string());
  state.checkpoint_load_weights(CheckpointReader::open(checkpoint_resolve(path)));
}

// The checkpoint --resume names ("" with auto when the run has none yet).
std::string resume_source(const std::string& resume, const std::string& run_dir) {
  if (resume != "auto") return checkpoint_resolve(resume);
  std::string latest = checkpoint_latest(run_dir + "/ckpt");
  if (latest.empty())
    LLM_REQUIRE(
        !fs::exists(run_dir + "/metrics.jsonl"), "--resume auto: run '", run_dir,
        "' has no checkpoint to resume from (pass --train.overwrite true to start it over)");
  return latest;
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
  LLM_REQUIRE(cmd.resume.empty() || cmd.init_from.empty(),
              "--resume continues a run and --init-from starts a new one: pass only one");
  const std::string run_path = (fs::path(cfg.train.out_dir) / cfg.train.name).string();
  std::string ckpt_path;
  if (!cmd.resume.empty()) {
    ckpt_path = resume_source(cmd.resume, run_path);
    if (ckpt_path.empty())
      std::printf("--resume auto: run %s has no checkpoint yet, starting it\n", run_path.c_str());
  }
  const bool resuming = !ckpt_path.empty();
  // Opening checks the format, sizes and config before anything in the run directory changes.
  std::optional<CheckpointReader> ckpt;
  json changed = json::object();
  if (resuming) {
    ckpt.emplace(CheckpointReader::open(ckpt_path));
    changed = resume_check_config(*ckpt, cfg);
  }
  const std::string run_dir = run_dir_prepare(cfg, cfg.train.overwrite || !cmd.resume.empty());

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
  LoopState ls;
  double load_seconds = 0.0;
  if (resuming) {
    const auto t0 = Clock::now();
    state.checkpoint_load(*ckpt);
    restore_scaler(*ckpt, state);
    restore_loop_state(*ckpt, &ls);
    loader.set_position(LoaderPosition{ls.step, 0});
    load_seconds = seconds_since(t0);
  } else if (!cmd.init_from.empty()) {
    init_from(state, cmd.init_from);
  } else {
    state.init_weights(static_cast<uint64_t>(cfg.train.seed));
  }
  // The run directory changes only now that the checkpoint has loaded.
  if (resuming) {
    run_metrics_truncate(run_dir, ls.step);
  } else {
    fs::remove(run_dir + "/metrics.jsonl");
    if (cfg.train.overwrite) fs::remove_all(run_dir + "/ckpt");
  }
  run_write_config(run_dir, cfg);
  GptModel& model = state.model();
  model.plan(B, T);

  const int64_t tokens_per_step = static_cast<int64_t>(world) * B * A * T;
  const double tokens_per_byte = meta.val.bytes > 0 ? static_cast<double>(meta.val.tokens) /
                                                          static_cast<double>(meta.val.bytes)
                                                    : 0.0;
  std::vector<int64_t> val_starts = loader.val_windows(T, cfg.train.eval_windows);

  std::printf(
      "ledgerlm train: run %s | %s params | L%lld H%lld C%lld T%lld | vocab %lld (padded %lld)\n",
      run_dir.c_str(), format_count(static_cast<double>(state.table().num_params)).c_str(),
      static_cast<long long>(cfg.model.n_layer), static_cast<long long>(cfg.model.n_head),
      static_cast<long long>(cfg.model.n_embd), static_cast<long long>(T),
      static_cast<long long>(cfg.model.vocab_size),
      static_cast<long long>(cfg.model.padded_vocab()));
  std::printf(
      "global batch = world %d x micro-batch %lld x accumulation %lld = %lld sequences = %lld "
      "tokens per step\n",
      world, static_cast<long long>(B), static_cast<long long>(A),
      static_cast<long long>(world * B * A), static_cast<long long>(tokens_per_step));
  std::printf(
      "optimizer %s (impl %s), lr %g, schedule %s, precision params %s grads %s master %s, %d "
      "threads\n",
      cfg.optim.name.c_str(), cfg.optim.impl.c_str(), cfg.optim.lr, cfg.optim.schedule.c_str(),
      dtype_name(state.plan().params), dtype_name(state.plan().grads), master_text(state.plan()),
      backend->num_threads());
  RunLedger ledger(cfg, state, world, rank);
  ledger.print_prediction();

  MetricsLog log(run_dir + "/metrics.jsonl");
  if (resuming) {
    std::printf("resumed from %s: step %lld, %s tokens (loaded %s in %.2fs)\n", ckpt->dir().c_str(),
                static_cast<long long>(ls.step),
                format_count(static_cast<double>(ls.tokens)).c_str(),
                format_count(static_cast<double>(ckpt->bytes())).c_str(), load_seconds);
    for (const auto& [key, c] : changed.items())
      std::printf("resume: %s changed from %s to %s\n", key.c_str(),
                  c["from"].get<std::string>().c_str(), c["to"].get<std::string>().c_str());
    log.write({{"step", ls.step},
               {"tokens", ls.tokens},
               {"resume", ckpt->dir()},
               {"ckpt_load_s", load_seconds},
               {"ckpt_bytes", ckpt->bytes()},
               {"config_changed", changed}});
  }
  std::fflush(stdout);

  std::vector<int32_t> inputs(static_cast<size_t>(B * T)), targets(inputs.size());
  const auto t_start = Clock::now();
  int64_t last_saved = resuming ? ls.step : -1;

  auto run_eval = [&](int64_t at_step) {
    EvalResult ev =
        evaluate_windows(model, state.params(), val_tokens, val_starts, T, B, tokens_per_byte);
    ls.last_val = ev.loss;
    if (ev.loss < ls.best_val) {
      ls.best_val = ev.loss;
      ls.best_bpb = ev.bpb;
    }
    json rec = {{"step", at_step},        {"tokens", ls.tokens}, {"wall_s", seconds_since(t_start)},
                {"val_loss", ev.loss},    {"val_bpb", ev.bpb},   {"val_ppl", ev.perplexity},
                {"val_tokens", ev.tokens}};
    log.write(rec);
    std::printf("eval  step %lld | val loss %.4f | val bpb %.4f | ppl %.2f | tokens %s\n",
                static_cast<long long>(at_step), ev.loss, ev.bpb, ev.perplexity,
                format_count(static_cast<double>(ls.tokens)).c_str());
    std::fflush(stdout);
  };

  auto save_checkpoint = [&]() {
    CkptSaveOptions so;
    so.keep = cfg.ckpt.keep;
    so.world = world;
    so.rank = rank;
    CkptSaveResult res =
        checkpoint_save(run_dir + "/ckpt", ls.step, checkpoint_meta(cfg, state, ls, ledger, world),
                        state.checkpoint_pieces(), so);
    last_saved = ls.step;
    log.write({{"step", ls.step},
               {"tokens", ls.tokens},
               {"ckpt", res.dir},
               {"ckpt_save_s", res.seconds},
               {"ckpt_bytes", res.bytes},
               {"ckpt_data_bytes", res.data_bytes}});
    std::printf("ckpt  step %lld | %s | %s bytes in %.2fs\n", static_cast<long long>(ls.step),
                res.dir.c_str(), format_count(static_cast<double>(res.bytes)).c_str(), res.seconds);
    std::fflush(stdout);
  };

  stop_signal_install();
  std::string stop_reason;
  while (true) {
    const double elapsed = ls.train_seconds;
    bool done = (cfg.train.max_steps > 0 && ls.step >= cfg.train.max_steps) ||
                (cfg.train.max_tokens > 0 && ls.tokens >= cfg.train.max_tokens) ||
                (cfg.train.max_seconds > 0 && elapsed >= cfg.train.max_seconds);
    if (done) break;
    const int64_t step = ++ls.step;
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
      ++ls.skipped;
      LLM_REQUIRE(state.plan().scaler_on, "non-finite gradients at step ", step,
                  ": training diverged (try a lower optim.lr)");
      LLM_REQUIRE(state.scaler().state().consecutive_skips < cfg.precision.max_consecutive_skips,
                  "fp16: ", state.scaler().state().consecutive_skips,
                  " consecutive steps with non-finite gradients at step ", step, " (loss scale ",
                  state.scaler().scale(), "): stopping");
    }
    ls.tokens += tokens_per_step;
    const double step_s = seconds_since(t0);
    ls.train_seconds += step_s;
    const double tps = static_cast<double>(tokens_per_step) / step_s;

    json rec = {{"step", step},
                {"tokens", ls.tokens},
                {"wall_s", seconds_since(t_start)},
                {"train_s", ls.train_seconds},
                {"loss", loss},
                {"lr", lr},
                {"grad_norm", st.grad_norm},
                {"tokens_per_s", tps},
                {"step_ms", step_s * 1e3},
                {"optim_ms", st.optim_ms},
                {"comm_ms", 0.0},
                {"loss_scale", state.loss_scale()},
                {"skipped_steps", ls.skipped}};
    const bool last = (cfg.train.max_steps > 0 && step >= cfg.train.max_steps) ||
                      (cfg.train.max_tokens > 0 && ls.tokens >= cfg.train.max_tokens) ||
                      (cfg.train.max_seconds > 0 && ls.train_seconds >= cfg.train.max_seconds);
    if (step % cfg.train.log_interval == 0 || step == 1 || last) ledger.add_measured(&rec);
    log.write(rec);
    if (step % cfg.train.log_interval == 0 || step == 1 || last) {
      double frac = 0.0;
      if (cfg.train.max_steps > 0)
        frac = std::max(frac, static_cast<double>(step) / cfg.train.max_steps);
      if (cfg.train.max_tokens > 0)
        frac = std::max(frac, static_cast<double>(ls.tokens) / cfg.train.max_tokens);
      if (cfg.train.max_seconds > 0)
        frac = std::max(frac, ls.train_seconds / cfg.train.max_seconds);
      double eta = frac > 0 ? ls.train_seconds * (1.0 - frac) / frac : NAN;
      std::printf(
          "step %lld/%lld | loss %.4f | val %s | lr %.2e | norm %.3f | %s tok/s | %.0f ms | ETA "
          "%s%s\n",
          static_cast<long long>(step), static_cast<long long>(total_steps), loss,
          std::isnan(ls.last_val) ? "-" : std::to_string(ls.last_val).substr(0, 6).c_str(), lr,
          st.grad_norm, format_count(tps).c_str(), step_s * 1e3, format_duration(eta).c_str(),
          st.skipped ? " | SKIPPED (overflow)" : "");
      std::fflush(stdout);
    }
    if ((cfg.train.eval_interval > 0 && step % cfg.train.eval_interval == 0) || last)
      run_eval(step);
    if (cfg.train.save_interval > 0 && step % cfg.train.save_interval == 0 && !last)
      state.save_weights(run_dir + "/model.safetensors");
    if (cfg.ckpt.interval > 0 && step % cfg.ckpt.interval == 0 && !last) save_checkpoint();
    if (!last) {
      stop_reason = stop_check(run_dir);  // several ranks: all-reduce (max) of this flag
      if (!stop_reason.empty()) break;
    }
  }
  if (ls.step == 0) run_eval(0);
  if (ls.step > 0 && last_saved != ls.step) save_checkpoint();
  state.save_weights(run_dir + "/model.safetensors");
  stop_signal_restore();
  const double wall = seconds_since(t_start);
  if (!stop_reason.empty()) {
    stop_file_clear(run_dir);
    json rec = {{"step", ls.step}, {"tokens", ls.tokens}, {"stopped", stop_reason}};
    log.write(rec);
    ledger.finish(run_dir);
    std::printf(
        "stopped by %s after step %lld: checkpoint %s/ckpt/%s\n"
        "resume with: ledgerlm train --config %s/config.toml --resume auto\n",
        stop_reason.c_str(), static_cast<long long>(ls.step), run_dir.c_str(),
        checkpoint_dir_name(ls.step).c_str(), run_dir.c_str());
    return 0;
  }
  json summary = {{"summary", true},
                  {"steps", ls.step},
                  {"tokens", ls.tokens},
                  {"wall_s", wall},
                  {"train_s", ls.train_seconds},
                  {"mean_tokens_per_s", ls.tokens / std::max(ls.train_seconds, 1e-9)},
                  {"best_val_loss", finite_or_null(ls.best_val)},
                  {"best_val_bpb", finite_or_null(ls.best_bpb)},
                  {"skipped_steps", ls.skipped}};
  ledger.add_measured(&summary);
  log.write(summary);
  ledger.finish(run_dir);
  std::printf(
      "done: %lld steps, %s tokens in %s (%s tok/s) | best val loss %.4f, bpb %.4f | weights "
      "%s/model.safetensors\n",
      static_cast<long long>(ls.step), format_count(static_cast<double>(ls.tokens)).c_str(),
      format_duration(wall).c_str(),
      format_count(ls.tokens / std::max(ls.train_seconds, 1e-9)).c_str(), ls.best_val, ls.best_bpb,
      run_dir.c_str());
  return 0;
}

}  // namespace ledgerlm
