// The training loop (see train_loop.h).
#include "train/run/train_loop.h"

#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/backends/cpu_facts.h"
#include "optim/schedule.h"
#include "train/comm/comm.h"
#include "train/ledger/ledger.h"
#include "train/run/build_info.h"
#include "train/run/evaluator.h"
#include "train/run/metrics.h"
#include "train/run/run_dir.h"
#include "train/run/run_summary.h"
#include "train/run/stop_signal.h"
#include "train/run/tensorboard.h"
#include "train/run/test_stop_hook.h"
#include "train/step/train_step.h"

namespace ledgerlm {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

class TrainLoop {
 public:
  explicit TrainLoop(TrainRun& run)
      : run_(run),
        cfg_(run.cfg),
        state_(*run.state),
        ls_(run.loop),
        batches_(*run.loader),
        ledger_(*run.ledger) {
    if (run.lead()) log_ = std::make_unique<MetricsLog>(run.run_dir + "/metrics.jsonl");
    if (run.lead() && cfg_.train.tensorboard) tb_ = std::make_unique<TensorBoardLog>(run.run_dir);
    const DataMeta& meta = run.meta;
    tokens_per_byte_ = meta.val.bytes > 0 ? static_cast<double>(meta.val.tokens) /
                                                static_cast<double>(meta.val.bytes)
                                          : 0.0;
    // prepare --val-fraction 0 leaves no val split: the run trains without evaluation.
    if (meta.val.tokens > 0)
      val_starts_ = run.loader->val_windows(cfg_.train.seq_len, cfg_.train.eval_windows);
    last_saved_ = run.resuming() ? ls_.step : -1;
    if (run.resuming() && run.lead() && budget_spent(ls_.train_seconds)) restore_final_figures();
  }

  int run() {
    // A finished run resumed with the same budget (a rerun of a sweep, --resume auto): nothing to
    // train. Leave its files as they are. A run at its budget that has no finished summary or no
    // weights (killed after its final checkpoint) goes on: train() trains no step and writes them.
    if (run_.finished) {
      if (run_.lead())
        std::printf(
            "run %s: already at step %lld, its budget is spent: nothing to do (raise "
            "train.max_steps, max_tokens or max_seconds to continue it)\n",
            run_.run_dir.c_str(), static_cast<long long>(ls_.step));
      return 0;
    }
    // A job that the watchdog ends from its thread (this rank blocked in a collective) records
    // the failed run the same way.
    comm().set_last_words([this](const std::string& reason) { end_failed(reason); });
    struct Forget {
      Comm& comm;
      ~Forget() { comm.set_last_words(nullptr); }
    } forget{comm()};
    try {
      return train();
    } catch (const std::exception& e) {
      end_failed(e.what());
      throw;
    }
  }

 private:
  int train() {
    print_header();
    tokens_at_start_ = trained_tokens_ = ls_.tokens;
    trained_step_ = ls_.step;
    t_start_ = t_loop_end_ = Clock::now();
    // Only rank 0 speaks; every rank honours the signal.
    stop_signal_install(
        "if interrupted before the save completes, resume from the last complete checkpoint "
        "with: " +
            resume_command(),
        run_.lead());
    std::string stop_reason;
    while (!budget_spent(ls_.train_seconds)) {
      const int64_t step = ++ls_.step;
      comm().watch().begin(CommPhase::kTraining, step);
      test_hooks(step);
      const int64_t total =
          schedule_total_steps(cfg_.train, run_.tokens_per_step(), step, ls_.train_seconds);
      const double lr = schedule_lr(cfg_.optim, step, total);
      state_.set_schedule_length(total);
      const auto t0 = Clock::now();
      const StepResult r = train_step(state_, batches_, step, lr);
      if (r.skipped) ++ls_.skipped;
      ls_.tokens += run_.tokens_per_step();
      trained_step_ = step;
      trained_tokens_ = ls_.tokens;
      const double step_s = seconds_since(t0);
      ls_.train_seconds += step_s;
      const bool last = budget_spent(ls_.train_seconds);
      log_step(r, step_s, total, last);
      if ((cfg_.train.eval_interval > 0 && step % cfg_.train.eval_interval == 0) || last)
        run_eval(step);
      if (cfg_.train.save_interval > 0 && step % cfg_.train.save_interval == 0 && !last)
        save_weights();
      if (cfg_.ckpt.interval > 0 && step % cfg_.ckpt.interval == 0 && !last) save_checkpoint();
      t_loop_end_ = Clock::now();
      if (!last) {
        comm().watch().begin(CommPhase::kTraining, step);  // the step's stop check
        stop_reason = stop_agreed();
        if (!stop_reason.empty()) break;
      }
    }
    if (ls_.step == 0) run_eval(0);
    if (ls_.step > 0 && last_saved_ != ls_.step) save_checkpoint();
    save_weights();
    stop_signal_restore();
    comm().watch().begin(CommPhase::kFinish, ls_.step);
    return stop_reason.empty() ? finish() : finish_stopped(stop_reason);
  }

  // A stop asked on any rank (its signal, or the STOP file) stops every rank after this step:
  // the ranks agree with an all-reduce, so they all save at the same step.
  std::string stop_agreed() {
    std::string reason = stop_check(run_.run_dir);
    if (run_.world == 1) return reason;
    int64_t flag[1] = {reason.empty() ? 0 : 1};
    comm().all_reduce_max(flag, 1);
    if (flag[0] == 0) return "";
    const std::vector<std::string> all = comm().all_gather_text(reason);
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) return r == 0 ? all[r] : error_message(all[r], " on rank ", r);
    return "stop";
  }

  Comm& comm() { return *run_.comm; }

  // The figures of the checkpoint's step that the summary reports but the checkpoint does not
  // keep (the step's training loss, its evaluation's bpb, B_simple), from the run's log, which is
  // durable up to the checkpoint: a job that trains no further step (completing a run killed
  // after its final checkpoint) then writes the summary a normal finish wrote.
  void restore_final_figures() {
    const json rec = run_metrics_at_step(run_.run_dir, ls_.step);
    auto number = [&](const char* key, double* to) {
      if (rec.contains(key) && rec[key].is_number()) *to = rec[key].get<double>();
    };
    number("loss", &last_loss_);
    number("val_bpb", &last_bpb_);
    number("b_simple", &last_b_simple_);
  }

  // How to continue this run (under mpirun: the same launch, with the resume flag).
  std::string resume_command() const {
    const std::string base =
        "ledgerlm train --config " + shell_quote(run_.run_dir + "/config.toml") + " --resume auto";
    return run_.world > 1 ? "mpirun -np " + std::to_string(run_.world) + " " + base : base;
  }

  // Test hooks for the failure tests, each "RANK:STEP" for that rank when it begins that step:
  // LEDGERLM_TEST_KILL_AT kills it with SIGKILL (a rank dying mid-run); LEDGERLM_TEST_FAIL_AT
  // throws an Error on it alone; LEDGERLM_TEST_PAUSE_AT="RANK:STEP:SECONDS" makes it sleep that
  // long (a slow rank). LEDGERLM_TEST_STOP_IN stops a rank as it enters a phase other than a
  // step (test_stop_hook.h).
  void test_hooks(int64_t step) const {
    auto at = [&](const char* var, double* seconds) {
      const char* v = std::getenv(var);
      int rank = -1;
      long long at_step = -1;
      if (v == nullptr) return false;
      const int got = seconds ? std::sscanf(v, "%d:%lld:%lf", &rank, &at_step, seconds)
                              : std::sscanf(v, "%d:%lld", &rank, &at_step);
      return got == (seconds ? 3 : 2) && rank == run_.rank && at_step == step;
    };
    if (at("LEDGERLM_TEST_KILL_AT", nullptr)) ::raise(SIGKILL);
    if (at("LEDGERLM_TEST_FAIL_AT", nullptr))
      fail(error_message("test failure at step ", step, " (LEDGERLM_TEST_FAIL_AT)"));
    double seconds = 0.0;
    if (at("LEDGERLM_TEST_PAUSE_AT", &seconds))
      std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  }

  // Every record goes to metrics.jsonl and, as scalars, to the TensorBoard event file.
  void log_write(const json& record) {
    if (run_.lock) run_.lock->verify();  // still this run's job (run_lock.h)
    if (log_) log_->write(record);
    if (tb_) tb_->write(record);
  }

  bool budget_spent(double train_seconds) const {
    LoopState ls = ls_;
    ls.train_seconds = train_seconds;
    return loop_budget_spent(cfg_.train, ls);
  }

  void print_header() {
    if (!run_.lead()) return;
    const ModelConfig& m = cfg_.model;
    const int64_t B = cfg_.train.micro_batch, A = cfg_.train.accum;
    std::printf(
        "ledgerlm train: run %s | %s params | L%lld H%lld C%lld T%lld | vocab %lld (padded "
        "%lld)\n",
        run_.run_dir.c_str(), format_count(static_cast<double>(state_.table().num_params)).c_str(),
        static_cast<long long>(m.n_layer), static_cast<long long>(m.n_head),
        static_cast<long long>(m.n_embd), static_cast<long long>(cfg_.train.seq_len),
        static_cast<long long>(m.vocab_size), static_cast<long long>(m.padded_vocab()));
    std::printf(
        "global batch = world %d x micro-batch %lld x accumulation %lld = %lld sequences = %lld "
        "tokens per step\n",
        run_.world, static_cast<long long>(B), static_cast<long long>(A),
        static_cast<long long>(run_.world * B * A), static_cast<long long>(run_.tokens_per_step()));
    if (run_.world > 1 || comm().name() != "single")
      std::printf("comm: %s (dist.comm = %s)\n", comm().name().c_str(), cfg_.dist.comm.c_str());
    if (run_.world > 1) std::printf("%s\n", comm().watch().rule_text().c_str());
    std::printf(
        "optimizer %s (impl %s), lr %g, schedule %s, precision params %s grads %s master %s, %d "
        "threads\n",
        cfg_.optim.name.c_str(), cfg_.optim.impl.c_str(), cfg_.optim.lr,
        cfg_.optim.schedule.c_str(), dtype_name(state_.plan().params),
        dtype_name(state_.plan().grads), master_text(state_.plan()), run_.backend->num_threads());
    ledger_.print_prediction();
    if (run_.print_tensors) std::printf("%s", ledger_.describe_tensors().c_str());
    print_backend();
    if (val_starts_.empty())
      std::printf("no val split in %s (prepared with --val-fraction 0): no evaluation\n",
                  cfg_.data.dir.c_str());
    if (run_.resuming()) print_resume();
    if (run_.resuming() && budget_spent(ls_.train_seconds))
      std::printf(
          "run %s: already at step %lld, its budget is spent, but its weights or finished "
          "summary are missing: writing them\n",
          run_.run_dir.c_str(), static_cast<long long>(ls_.step));
    std::fflush(stdout);
  }

  // The first record of each start of the run (a resume by another binary adds its own): the
  // build that trains (its commit and dirty flag, build_info.h) and where the kernels run (CPU:
  // the model, the vector path, the GEMM libraries, also printed), so that the run records what
  // trained it and what it measured on.
  void print_backend() {
    json rec = {{"step", ls_.step}, {"build", build_info_json()}};
    // precision.subnormals as the CPU threads do it now, read back from them (not the config's
    // value): the compute threads on a host backend, the host threads beside a device one.
    const std::string subnormals = cpu_backend_subnormals(run_.backend->num_threads());
    rec["subnormals"] = subnormals;
    if (run_.backend->name() == "cpu") {
      const CpuBackendReport rep = cpu_backend_report(cfg_.model.n_embd / cfg_.model.n_head,
                                                      cfg_.precision.matmul == "bf16");
      std::printf("cpu: %s | path %s | subnormals %s\ngemm: %s\n", rep.cpu.c_str(),
                  rep.path.c_str(), subnormals.c_str(), rep.gemm.c_str());
      rec["backend"] = {
          {"cpu", rep.cpu}, {"path", rep.path}, {"kernels", rep.kernels}, {"gemm", rep.gemm}};
    }
    log_write(rec);
  }

  void print_resume() {
    std::printf("resumed from %s: step %lld, %s tokens (loaded %s in %.2fs)\n",
                run_.resumed_from.c_str(), static_cast<long long>(ls_.step),
                format_count(static_cast<double>(ls_.tokens)).c_str(),
                format_count(static_cast<double>(run_.resumed_bytes)).c_str(), run_.load_seconds);
    for (const auto& [key, c] : run_.changed.items())
      std::printf("resume: %s changed from %s to %s\n", key.c_str(),
                  c["from"].get<std::string>().c_str(), c["to"].get<std::string>().c_str());
    const json& b = run_.batch_changed;
    if (!b.is_null())
      std::printf(
          "resume: global batch changed from %lld to %lld sequences (world %s, micro-batch %s, "
          "accum %s)\n",
          b["from"].get<long long>(), b["to"].get<long long>(),
          b["world"].get<std::string>().c_str(), b["micro_batch"].get<std::string>().c_str(),
          b["accum"].get<std::string>().c_str());
    log_write({{"step", ls_.step},
               {"tokens", ls_.tokens},
               {"resume", run_.resumed_from},
               {"ckpt_load_s", run_.load_seconds},
               {"ckpt_bytes", run_.resumed_bytes},
               {"config_changed", run_.changed},
               {"global_batch_changed", run_.batch_changed}});
  }

  // The step's metrics record, and on progress steps the memory figures and a progress line.
  void log_step(const StepResult& r, double step_s, int64_t total_steps, bool last) {
    const int64_t step = ls_.step;
    const double tps = static_cast<double>(run_.tokens_per_step()) / step_s;
    last_loss_ = r.loss;
    optim_ms_sum_ += r.optim_ms;
    ++job_steps_;
    json rec = {{"step", step},
                {"tokens", ls_.tokens},
                {"wall_s", seconds_since(t_start_)},
                {"train_s", ls_.train_seconds},
                {"loss", r.loss},
                {"lr", r.lr},
                {"grad_norm", r.grad_norm},
                {"tokens_per_s", tps},
                {"step_ms", step_s * 1e3},
                {"optim_ms", r.optim_ms},
                {"comm_ms", r.comm_ms},
                {"loss_scale", state_.loss_scale()},
                {"skipped_steps", ls_.skipped}};
    // Whole-tensor optimizer work's all-to-alls (Muon under ZeRO): bytes this rank sent.
    if (r.exchange_bytes > 0) rec["exchange_bytes"] = r.exchange_bytes;
    // train.gns: the step's two estimates, their EMAs and B_simple (in sequences).
    if (r.gns) {
      rec["gns_g2"] = finite_or_null(r.gns_step.g2);
      rec["gns_trace"] = finite_or_null(r.gns_step.trace);
      rec["gns_g2_ema"] = finite_or_null(r.gns_g2_ema);
      rec["gns_trace_ema"] = finite_or_null(r.gns_trace_ema);
      rec["b_simple"] = finite_or_null(r.b_simple);
      last_b_simple_ = r.b_simple;
    }
    if (const OffloadPager* pager = state_.offload_pager()) add_offload(pager->stats(), &rec);
    const bool progress = step % cfg_.train.log_interval == 0 || step == 1 || last;
    if (progress) add_memory(&rec);
    log_write(rec);
    if (progress && run_.lead()) print_progress(r, tps, step_s, total_steps);
  }

  // optim.offload = disk: this step's bytes moved and the wait for them; the I/O time the
  // measured bandwidth predicts for those bytes, beside the measured optimizer step.
  void add_offload(const OffloadStats& now, json* rec) {
    const DiskBandwidth bw = ledger_.disk_bandwidth();
    const int64_t read = now.bytes_read - offload_last_.bytes_read;
    const int64_t written = now.bytes_written - offload_last_.bytes_written;
    const double predicted_ms =
        bw.read_mb_s > 0 && bw.write_mb_s > 0
            ? 1e3 * (read / 1e6 / bw.read_mb_s + written / 1e6 / bw.write_mb_s)
            : 0.0;
    (*rec)["offload_read_bytes"] = read;
    (*rec)["offload_written_bytes"] = written;
    (*rec)["offload_stall_ms"] = 1e3 * (now.stall_s - offload_last_.stall_s);
    (*rec)["offload_io_predicted_ms"] = predicted_ms;
    offload_read_sum_ += read;
    offload_written_sum_ += written;
    offload_predicted_ms_sum_ += predicted_ms;
    offload_last_ = now;
  }

  void print_gns_summary() {
    if (state_.gns_source() == GnsSource::kOff || !run_.lead()) return;
    std::printf("gns: B_simple %.4g sequences at the last step (small batches: %s)\n",
                last_b_simple_, gns_source_name(state_.gns_source()));
  }

  void print_offload_summary() {
    if (state_.offload_pager() == nullptr || job_steps_ == 0) return;
    const double n = static_cast<double>(job_steps_);
    std::printf(
        "offload: per step %.3f MB read and %.3f MB written; at the measured bandwidth that I/O "
        "takes %.1f ms; the optimizer step took %.1f ms (means over %lld steps)\n",
        offload_read_sum_ / n / 1e6, offload_written_sum_ / n / 1e6, offload_predicted_ms_sum_ / n,
        optim_ms_sum_ / n, static_cast<long long>(job_steps_));
  }

  void print_progress(const StepResult& r, double tps, double step_s, int64_t total_steps) {
    const TrainConfig& t = cfg_.train;
    double frac = 0.0;
    if (t.max_steps > 0) frac = std::max(frac, static_cast<double>(ls_.step) / t.max_steps);
    if (t.max_tokens > 0) frac = std::max(frac, static_cast<double>(ls_.tokens) / t.max_tokens);
    if (t.max_seconds > 0) frac = std::max(frac, ls_.train_seconds / t.max_seconds);
    const double eta = frac > 0 ? ls_.train_seconds * (1.0 - frac) / frac : NAN;
    std::printf(
        "step %lld/%lld | loss %.4f | val %s | lr %.2e | norm %.3f | %s tok/s | %.0f ms | ETA "
        "%s%s\n",
        static_cast<long long>(ls_.step), static_cast<long long>(total_steps), r.loss,
        std::isnan(ls_.last_val) ? "-" : std::to_string(ls_.last_val).substr(0, 6).c_str(), r.lr,
        r.grad_norm, format_count(tps).c_str(), step_s * 1e3, format_duration(eta).c_str(),
        r.skipped ? " | SKIPPED (overflow)" : "");
    std::fflush(stdout);
  }

  // The ledger's figures of this rank, and with several ranks every rank's peaks (a collective:
  // every rank calls it at the same steps).
  void add_memory(json* rec) {
    ledger_.add_measured(rec);
    if (run_.world == 1) return;
    int64_t rss = -1, hwm = -1;
    process_rss_bytes(&rss, &hwm);
    const json mine = {{"rank", run_.rank},
                       {"tracked_peak", run_.backend->tracker().total().peak},
                       {"rss_hwm", hwm},
                       {"rss_anon", process_rss_anon_bytes()}};
    json ranks = json::array();
    for (const std::string& text : comm().all_gather_text(mine.dump()))
      ranks.push_back(json::parse(text));
    (*rec)["mem_ranks"] = ranks;
  }

  void run_eval(int64_t at_step) {
    if (val_starts_.empty()) return;
    comm().watch().begin(CommPhase::kEvaluation, at_step);
    test_stop_in(run_.rank, "evaluation");
    const auto t0 = Clock::now();
    state_.use_eval_weights(true);  // the weights the optimizer returns (Schedule-Free: x)
    EvalResult ev = evaluate_windows_ranks(
        state_.model(), state_.units(), comm(), run_.loader->val_tokens(), val_starts_,
        cfg_.train.seq_len, cfg_.train.micro_batch, tokens_per_byte_);
    state_.use_eval_weights(false);
    ls_.last_val = ev.loss;
    last_bpb_ = ev.bpb;
    if (ev.loss < ls_.best_val) {
      ls_.best_val = ev.loss;
      ls_.best_bpb = ev.bpb;
    }
    log_write({{"step", at_step},
               {"tokens", ls_.tokens},
               {"wall_s", seconds_since(t_start_)},
               {"val_loss", ev.loss},
               {"val_bpb", ev.bpb},
               {"val_ppl", ev.perplexity},
               {"val_tokens", ev.tokens}});
    if (!run_.lead()) return;
    std::printf("eval  step %lld | val loss %.4f | val bpb %.4f | ppl %.2f | tokens %s\n",
                static_cast<long long>(at_step), ev.loss, ev.bpb, ev.perplexity,
                format_count(static_cast<double>(ls_.tokens)).c_str());
    std::fflush(stdout);
    eval_s_ += seconds_since(t0);
  }

  void save_weights() {
    comm().watch().begin(CommPhase::kWeights, ls_.step);
    test_stop_in(run_.rank, "weights");
    state_.save_weights(run_.run_dir + "/model.safetensors");
  }

  void save_checkpoint() {
    comm().watch().begin(CommPhase::kCheckpoint, ls_.step);
    test_stop_in(run_.rank, "checkpoint");
    // The records up to this step are durable before the checkpoint that ends them.
    if (log_) log_->sync();
    if (tb_) tb_->sync();
    CkptSaveOptions so;
    so.keep = cfg_.ckpt.keep;
    so.world = run_.world;
    so.rank = run_.rank;
    so.all_gather_text = [this](const std::string& mine) { return comm().all_gather_text(mine); };
    CkptSaveResult res;
    try {
      res = checkpoint_save(run_.run_dir + "/ckpt", ls_.step,
                            checkpoint_meta(cfg_, state_, ls_, ledger_, run_.world),
                            state_.checkpoint_pieces(), so);
    } catch (const CkptSaveFailed& e) {
      // Every rank failed alike, the message naming the rank that hit it: reported once by
      // rank 0 (not once per rank, each adding its own "rank N:" before that rank's name).
      throw AgreedError(e.what());
    }
    last_saved_ = ls_.step;
    log_write({{"step", ls_.step},
               {"tokens", ls_.tokens},
               {"ckpt", res.dir},
               {"ckpt_save_s", res.seconds},
               {"ckpt_bytes", res.bytes},
               {"ckpt_data_bytes", res.data_bytes}});
    if (!run_.lead()) return;
    std::printf("ckpt  step %lld | %s | %s bytes in %.2fs\n", static_cast<long long>(ls_.step),
                res.dir.c_str(), format_count(static_cast<double>(res.bytes)).c_str(), res.seconds);
    std::fflush(stdout);
  }

  // The run's summary record ("finished" or "stopped"), with every rank's memory (a collective
  // unless `all_ranks` is false: a failed run's ranks may be anywhere).
  json summary_record(const std::string& status, bool all_ranks = true) {
    const double mean_tps = ls_.tokens / std::max(ls_.train_seconds, 1e-9);
    // End to end: this run's steps (every rank's tokens) over the loop's wall clock (every step's
    // data, metrics, progress and checkpoints included), evaluations excluded.
    const double loop_s = std::chrono::duration<double>(t_loop_end_ - t_start_).count() - eval_s_;
    const double e2e_tps =
        loop_s > 0 ? static_cast<double>(ls_.tokens - tokens_at_start_) / loop_s : 0.0;
    json summary = {{"summary", true},
                    {"status", status},
                    {"run", cfg_.train.name},
                    {"steps", ls_.step},
                    {"tokens", ls_.tokens},
                    {"wall_s", seconds_since(t_start_)},
                    {"train_s", ls_.train_seconds},
                    {"mean_tokens_per_s", mean_tps},
                    {"e2e_tokens_per_s", e2e_tps},
                    {"eval_s", eval_s_},
                    {"mean_optim_ms", job_steps_ > 0 ? json(optim_ms_sum_ / job_steps_) : json()},
                    {"final_loss", finite_or_null(last_loss_)},
                    {"final_val_loss", finite_or_null(ls_.last_val)},
                    {"final_val_bpb", finite_or_null(last_bpb_)},
                    {"best_val_loss", finite_or_null(ls_.best_val)},
                    {"best_val_bpb", finite_or_null(ls_.best_bpb)},
                    {"skipped_steps", ls_.skipped},
                    {"params", state_.table().num_params},
                    {"world", run_.world},
                    {"comm", run_.comm->name()},
                    {"global_batch", run_.world * cfg_.train.micro_batch * cfg_.train.accum},
                    {"tokens_per_step", run_.tokens_per_step()},
                    {"build", build_info_json()}};
    if (state_.gns_source() != GnsSource::kOff) {
      summary["final_b_simple"] = finite_or_null(last_b_simple_);
      summary["gns_source"] = gns_source_name(state_.gns_source());
    }
    if (all_ranks)
      add_memory(&summary);
    else
      ledger_.add_measured(&summary);
    return summary;
  }

  // The summary's one source: the same object ends metrics.jsonl and becomes summary.json.
  void write_summary(json summary) {
    run_summary_add_files(run_.run_dir, &summary);
    log_write(summary);
    if (log_) log_->sync();
    if (tb_) tb_->sync();
    run_summary_write(run_.run_dir, summary);
  }

  // The run failed: the signal that mpirun sends while it ends the job must not announce a
  // stop with a checkpoint, and rank 0 records the failure.
  void end_failed(const std::string& reason) noexcept {
    stop_signal_restore();
    write_failed_summary(reason);
  }

  // A run that fails after its start (diverged, too many fp16 skips, a write that failed) says
  // so: status "failed" and the error line, in summary.json and, where it can still be written,
  // as the log's summary line; else `compare` would take it for a run still going. Rank 0 only,
  // without collectives. Best effort: when this write fails too (the disk that is full), the
  // original error is reported alone, as without it; a job that lost the run to another
  // (run_lock.h) writes nothing.
  void write_failed_summary(const std::string& reason) noexcept {
    if (!run_.lead()) return;
    try {
      if (run_.lock) run_.lock->verify();
      json summary = summary_record("failed", false);
      summary["steps"] = trained_step_;  // the failing step did not complete
      summary["tokens"] = trained_tokens_;
      summary["failed"] = reason;
      run_summary_add_files(run_.run_dir, &summary);
      try {
        log_write(summary);
        if (log_) log_->sync();
        if (tb_) tb_->sync();
      } catch (const std::exception&) {
        // The log cannot take the line (its write may be what failed): summary.json alone.
      }
      run_summary_write(run_.run_dir, summary);
    } catch (const std::exception&) {
    }
  }

  // Every rank exits kExitStopped (stop_signal.h), after rank 0 has written the summary: mpirun
  // ends the other ranks once one exits non-zero, so none may leave before the summary is down.
  int finish_stopped(const std::string& reason) {
    json summary = summary_record("stopped");
    summary["stopped"] = reason;
    if (!run_.lead()) {
      comm().barrier();
      return kExitStopped;
    }
    write_stopped(summary, reason);
    if (run_.world > 1) comm().barrier();
    return kExitStopped;
  }

  void write_stopped(const json& summary, const std::string& reason) {
    stop_file_clear(run_.run_dir);
    log_write({{"step", ls_.step}, {"tokens", ls_.tokens}, {"stopped", reason}});
    write_summary(summary);
    ledger_.finish(run_.run_dir);
    std::printf(
        "stopped by %s after step %lld: checkpoint %s/ckpt/%s\n"
        "resume with: %s\n",
        reason.c_str(), static_cast<long long>(ls_.step), run_.run_dir.c_str(),
        checkpoint_dir_name(ls_.step).c_str(), resume_command().c_str());
  }

  int finish() {
    const json summary = summary_record("finished");
    if (!run_.lead()) return 0;
    write_summary(summary);
    ledger_.finish(run_.run_dir);
    print_offload_summary();
    print_gns_summary();
    char val[96] = "no evaluation";
    if (!val_starts_.empty())
      std::snprintf(val, sizeof val, "best val loss %.4f, bpb %.4f", ls_.best_val, ls_.best_bpb);
    std::printf(
        "done: %lld steps, %s tokens in %s (%s tok/s; end to end %s tok/s, evaluations "
        "excluded) | %s | weights %s/model.safetensors\n",
        static_cast<long long>(ls_.step), format_count(static_cast<double>(ls_.tokens)).c_str(),
        format_duration(summary["wall_s"].get<double>()).c_str(),
        format_count(summary["mean_tokens_per_s"].get<double>()).c_str(),
        format_count(summary["e2e_tokens_per_s"].get<double>()).c_str(), val, run_.run_dir.c_str());
    return 0;
  }

  TrainRun& run_;
  const RunConfig& cfg_;
  ModelState& state_;
  LoopState& ls_;
  LoaderBatches batches_;
  RunLedger& ledger_;                        // run_setup's
  std::unique_ptr<MetricsLog> log_;          // rank 0's
  std::unique_ptr<TensorBoardLog> tb_;       // rank 0's, unless train.tensorboard = false
  double last_b_simple_ = NAN;               // train.gns: of this job's last step
  double last_loss_ = NAN, last_bpb_ = NAN;  // of this job's last step and evaluation
  double optim_ms_sum_ = 0.0;                // over this job's steps (rank 0's optimizer time)
  OffloadStats offload_last_;                // the pager's figures at the previous step
  int64_t offload_read_sum_ = 0, offload_written_sum_ = 0;
  double offload_predicted_ms_sum_ = 0.0;
  int64_t job_steps_ = 0;
  int64_t trained_step_ = 0, trained_tokens_ = 0;  // after the last step whose update completed
  double tokens_per_byte_ = 0.0;
  std::vector<int64_t> val_starts_;
  int64_t last_saved_ = -1;
  int64_t tokens_at_start_ = 0;
  double eval_s_ = 0.0;  // evaluations inside the loop (excluded from end-to-end tokens/s)
  Clock::time_point t_start_ = Clock::now(), t_loop_end_ = t_start_;
};

}  // namespace

int64_t schedule_total_steps(const TrainConfig& t, int64_t tokens_per_step, int64_t step,
                             double elapsed) {
  if (t.max_steps > 0) return t.max_steps;
  if (t.max_tokens > 0) return (t.max_tokens + tokens_per_step - 1) / tokens_per_step;
  if (step <= 1 || elapsed <= 0) return std::max<int64_t>(step, 1000000);
  return std::max<int64_t>(step, static_cast<int64_t>(step * t.max_seconds / elapsed));
}

int train_loop(TrainRun& run) {
  TrainLoop loop(run);
  return loop.run();
}

}  // namespace ledgerlm
