// `ledgerlm study plan | run | report`: a study directory made from a study file (study_plan.h).
// `run` trains the manifest's unfinished runs, each through `ledgerlm train` spawned from this
// same binary (so the run lock, resume and summary are the trainer's own), -j N at a time with
// the cores shared among them; a Ctrl-C stops every run at a checkpoint and a later `run`
// continues. A finished run is then evaluated on the whole val split (study_eval.json), since its
// summary's val loss covers only train.eval_windows windows. LR sweeps are widened by one point
// at an edge that holds the best loss, up to lr_max_points. With objective = "steps_to_target"
// the score is the run's steps to target_loss from its in-run evals (study_objective.h), recorded
// in study_eval.json; the whole-split evaluation is then skipped (it would not change the score)
// except for finals reported on the test split, whose final test loss only that evaluation gives.
// Once an arm's sweep is settled its finals are planned (study_finals.h) and run; a final run is
// evaluated on the reported split too (test when the data has one, see [finals] split). Wall-clock
// finals run alone, with every core, and record the load average around them. `report` hands the
// directory to scripts/study_report.py.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "model/base/atomic_file.h"
#include "model/base/check.h"
#include "train/cli/commands.h"
#include "train/cli/install_layout.h"
#include "train/cli/study_finals.h"
#include "train/cli/study_lock.h"
#include "train/cli/study_objective.h"
#include "train/cli/study_plan.h"
#include "train/cli/study_slurm.h"
#include "train/run/run_summary.h"

extern char** environ;

namespace ledgerlm {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void on_stop_signal(int) {
  g_stop = 1;
}

std::string shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,+") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// finished | failed | pending: a run's state from its summary.json.
std::string run_state(const std::string& run_dir) {
  if (!fs::exists(run_dir + "/summary.json")) return "pending";
  const json s = run_summary_read(run_dir);
  const std::string status = s.is_object() ? s.value("status", std::string()) : std::string();
  if (status == "finished") return "finished";
  // A run that failed after its start (a non-finite loss: an LR too high) fails again the same
  // way; it is reported, not retried.
  if (status == "failed") return "failed";
  return "pending";
}

// The `ledgerlm train` command of one run.
// With `how` false the command has neither --resume nor --train.overwrite (a Slurm array task
// decides that when it starts: study_slurm.h).
std::vector<std::string> train_argv(const json& manifest, const json& run,
                                    const std::string& study_dir, int64_t threads,
                                    bool how = true) {
  // Absolute paths: a printed command works from any directory (xargs, a job array).
  const std::string dir = fs::absolute(study_dir).lexically_normal().string();
  const std::string name = run["name"];
  const std::string run_dir = dir + "/runs/" + name;
  const int64_t world = run.value("world", 1);
  std::vector<std::string> argv;
  if (world > 1) argv = {"mpirun", "-np", std::to_string(world)};
  argv.push_back(self_exe());
  argv.push_back("train");
  if (!manifest.value("config", std::string()).empty()) {
    argv.push_back("--config");
    argv.push_back(manifest["config"]);
  }
  for (const auto& [key, value] : run["overrides"].items()) {
    argv.push_back("--" + key);
    argv.push_back(value.get<std::string>());
  }
  argv.insert(argv.end(), {"--train.out_dir", dir + "/runs", "--train.name", name});
  if (!run["overrides"].contains("train.threads")) {
    argv.push_back("--train.threads");
    argv.push_back(std::to_string(std::max<int64_t>(1, threads / world)));
  }
  // Continue where an interrupted run stopped; a run with a log but no checkpoint (killed before
  // its first save) starts over.
  const bool has_ckpt = fs::is_directory(run_dir + "/ckpt") && !fs::is_empty(run_dir + "/ckpt");
  if (!how) return argv;
  if (has_ckpt) {
    argv.insert(argv.end(), {"--resume", "auto"});
  } else if (fs::exists(run_dir)) {
    argv.insert(argv.end(), {"--train.overwrite", "true"});
  }
  return argv;
}

// Starts ARGV in its own process group (a terminal's Ctrl-C reaches `study run` alone, which
// passes one SIGINT on: a second would abort a run mid-save), output appended to LOG.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  LLM_REQUIRE(rc == 0, "study: cannot start ", argv[0], ": ", std::strerror(rc));
  return pid;
}

// Reads the whole-split val loss from an eval log ("loss X nats/token"); NaN when absent.
double eval_loss_from_log(const std::string& log) {
  std::ifstream in(log);
  std::string line;
  double loss = std::numeric_limits<double>::quiet_NaN();
  // A line "loss X nats/token ...": X is the number between the two words.
  const std::string head = "loss ", tail = " nats/token";
  while (std::getline(in, line)) {
    if (line.rfind(head, 0) != 0) continue;
    const size_t end = line.find(tail, head.size());
    if (end == std::string::npos) continue;
    try {
      size_t used = 0;
      const std::string number = line.substr(head.size(), end - head.size());
      const double v = std::stod(number, &used);
      if (used == number.size()) loss = v;
    } catch (const std::exception&) {
    }
  }
  return loss;
}

// One slot of -j N: a run training, then its whole-split evaluation(s).
struct Job {
  pid_t pid = 0;
  std::string name;
  enum Stage { kTrain, kEvalVal, kEvalTest } stage = kTrain;
  int64_t world = 1;
  bool exclusive = false;  // a wall-clock run: nothing else runs beside its training
  json loadavg_start;      // wall-clock runs: /proc/loadavg before the run
  json loadavg_end;        // ... and after its training
  double busy_start = 0;   // wall-clock runs: CPU-seconds busy on the machine at the start
  std::chrono::steady_clock::time_point wall_start;
  json other_cpu;  // wall-clock runs: what other processes took of the CPUs meanwhile
  double val_loss = std::numeric_limits<double>::quiet_NaN();
};

std::vector<std::string> eval_argv(const std::string& run_dir, int64_t threads,
                                   const std::string& split) {
  return {self_exe(),      "eval",
          "--run",         run_dir,
          "--split",       split,
          "--max-windows", "0",
          "--threads",     std::to_string(threads),
          "--device",      "cpu"};
}

// CPU-seconds the whole machine has been busy (every core; /proc/stat's first line: all but
// idle and iowait); NaN when unreadable.
double machine_busy_seconds() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(in >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) ||
      cpu != "cpu")
    return std::numeric_limits<double>::quiet_NaN();
  return (user + nice + system + irq + softirq + steal) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// The 1-, 5- and 15-minute load averages ([] when unreadable).
json load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return json::array();
  return json::array({a, b, c});
}

// Whether a run's data directory (its config.toml's data.dir) has a test split.
bool data_has_test_split(const std::string& run_dir) {
  try {
    const toml::table cfg = toml::parse_file(run_dir + "/config.toml");
    const std::optional<std::string> data = cfg["data"]["dir"].value<std::string>();
    return data && fs::exists(fs::path(*data) / "test.bin");
  } catch (const toml::parse_error&) {
    return false;
  }
}

// The split a final run is reported on: "test" or "val" ("" for sweep runs: val only).
std::string report_split(const json& manifest, const json& run, const std::string& run_dir) {
  if (!run.contains("phase") || !manifest.contains("finals")) return "";
  const std::string split = manifest["finals"].value("split", std::string("auto"));
  if (split == "auto") return data_has_test_split(run_dir) ? "test" : "val";
  return split;
}

// Whether J is an object whose KEY is a number. (A const json's operator[] with a missing key
// is undefined behaviour, not null: every optional key is looked up through this or value().)
bool is_number_at(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_number();
}

// The final loss a sweep compares: the whole-split val loss when evaluated, else the summary's.
// Final runs are compared by the report on their reported split; selection uses val only.
double run_loss(const std::string& run_dir) {
  std::ifstream in(run_dir + "/study_eval.json");
  if (in) {
    const json e = json::parse(in, nullptr, false);
    if (is_number_at(e, "full_val_loss")) return e["full_val_loss"];
  }
  const json s = run_summary_read(run_dir);
  if (is_number_at(s, "final_val_loss")) return s["final_val_loss"];
  return std::numeric_limits<double>::quiet_NaN();
}

bool steps_objective(const json& manifest) {
  return manifest.value("objective", std::string("val_loss")) == "steps_to_target";
}

// A finished run's steps and tokens to the manifest's target_loss, from its metrics.jsonl.
StudyToTarget run_to_target(const json& manifest, const std::string& run_dir) {
  return study_steps_to_target(study_val_curve(run_dir + "/metrics.jsonl"),
                               manifest["target_loss"].get<double>());
}

// What the sweeps and finals minimise for a finished run: its final loss, or its steps to target.
double run_score(const json& manifest, const std::string& run_dir) {
  return steps_objective(manifest) ? run_to_target(manifest, run_dir).steps : run_loss(run_dir);
}

json read_study_eval(const std::string& run_dir) {
  std::ifstream in(run_dir + "/study_eval.json");
  if (!in) return json();
  return json::parse(in, nullptr, false);
}

// The steps_to_target objective's fields of study_eval.json (null: never reached).
json score_fields(const json& manifest, const std::string& run_dir) {
  const StudyToTarget t = run_to_target(manifest, run_dir);
  auto number = [](double v) { return std::isfinite(v) ? json(v) : json(); };
  return {{"objective", manifest["objective"]},
          {"target_loss", manifest["target_loss"]},
          {"steps_to_target", number(t.steps)},
          {"tokens_to_target", number(t.tokens)}};
}

// Records a finished run's steps to target in its study_eval.json, keeping what it held.
void write_score(const json& manifest, const std::string& run_dir) {
  json e = read_study_eval(run_dir);
  if (!e.is_object()) e = json::object();
  e.update(score_fields(manifest, run_dir));
  write_file_atomic(run_dir + "/study_eval.json", e.dump(2) + "\n");
}

// Whether a finished run still needs a whole-split evaluation: always with the val_loss objective;
// with steps_to_target only a final reported on the test split.
bool needs_eval(const json& manifest, const json& run, const std::string& run_dir) {
  const json e = read_study_eval(run_dir);
  const bool test = report_split(manifest, run, run_dir) == "test";
  if (steps_objective(manifest) && !test) return false;
  if (!is_number_at(e, "full_val_loss")) return true;
  return test && !is_number_at(e, "full_test_loss");
}

// Whether a finished run's study_eval.json lacks its steps to target.
bool needs_score(const json& manifest, const std::string& run_dir) {
  if (!steps_objective(manifest)) return false;
  const json e = read_study_eval(run_dir);
  return !e.is_object() || !e.contains("steps_to_target") ||
         e.value("target_loss", json()) != manifest.value("target_loss", json());
}

// Runs every unfinished run of the manifest; false when stopped by a signal. Wall-clock runs go
// last and alone.
// Runs that a Slurm job of the study (`study run --slurm`) still holds in the queue are left to
// it and counted in *LEFT_TO_SLURM. RANKS > 0 starts every run on that many ranks
// (study_spread_ranks). With TRAIN false only the finished runs' evaluations are done (the step
// after a study's Slurm arrays: its unfinished runs go back to Slurm).
bool run_pending(const json& manifest, const std::string& dir, int64_t jobs, int64_t threads,
                 int64_t ranks, bool train, int* left_to_slurm) {
  std::vector<std::pair<std::string, bool>> todo;  // name, needs training (else only the eval)
  std::vector<std::pair<std::string, bool>> wall_clock;
  std::map<std::string, json> by_name;
  std::string squeue_error;
  const std::map<std::string, std::string> queue = study_slurm_queue(manifest, &squeue_error);
  if (!squeue_error.empty())
    std::printf("study %s: squeue failed (%s): runs of its Slurm jobs may train twice\n",
                dir.c_str(), squeue_error.c_str());
  *left_to_slurm = 0;
  for (const json& r : manifest["runs"]) {
    const std::string name = r["name"];
    by_name[name] = study_spread_ranks(manifest, r, ranks);
    const std::string run_dir = dir + "/runs/" + name;
    const std::string state = run_state(run_dir);
    auto& list = study_is_wall_clock(r) ? wall_clock : todo;
    if (state == "pending" && queue.count(name)) {
      ++*left_to_slurm;
      continue;
    }
    if (state == "pending" && train) list.push_back({name, true});
    if (state == "finished" && needs_eval(manifest, r, run_dir))
      list.push_back({name, false});
    else if (state == "finished" && needs_score(manifest, run_dir))
      write_score(manifest, run_dir);
  }
  todo.insert(todo.end(), wall_clock.begin(), wall_clock.end());
  if (todo.empty()) return true;
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::printf("study %s: %zu run(s) to do, %lld at a time, %lld thread(s) each%s\n", dir.c_str(),
              todo.size(), static_cast<long long>(jobs), static_cast<long long>(threads),
              wall_clock.empty() ? "" : " (wall-clock runs alone, with every core)");
  std::fflush(stdout);
  std::vector<Job> running;
  size_t next = 0;
  bool forwarded = false;
  auto start_eval = [&](Job& job, Job::Stage stage) {
    const std::string run_dir = dir + "/runs/" + job.name;
    job.stage = stage;
    job.pid = spawn(eval_argv(run_dir, threads, stage == Job::kEvalTest ? "test" : "val"),
                    run_dir + (stage == Job::kEvalTest ? ".eval_test.log" : ".eval.log"));
  };
  auto write_eval = [&](const Job& job) {
    const std::string run_dir = dir + "/runs/" + job.name;
    json e = {{"full_val_loss", job.val_loss}, {"split", "val"}};
    if (job.stage == Job::kEvalTest) {
      const double test = eval_loss_from_log(run_dir + ".eval_test.log");
      if (!std::isfinite(test)) return false;
      e["full_test_loss"] = test;
      e["split"] = "test";
    }
    const json& run = by_name[job.name];
    if (steps_objective(manifest)) e.update(score_fields(manifest, run_dir));
    if (study_is_wall_clock(run)) {
      // The load around the run, kept from an earlier study run when this one only evaluates.
      json old;
      std::ifstream in(run_dir + "/study_eval.json");
      if (in) old = json::parse(in, nullptr, false);
      e["seconds_asked"] = std::stod(run["overrides"]["train.max_seconds"].get<std::string>());
      e["loadavg_start"] = job.loadavg_start.is_null() && old.is_object()
                               ? old.value("loadavg_start", json())
                               : job.loadavg_start;
      e["loadavg_end"] = job.loadavg_end.is_null() && old.is_object()
                             ? old.value("loadavg_end", json())
                             : job.loadavg_end;
      e["other_cpu"] = job.other_cpu.is_null() && old.is_object() ? old.value("other_cpu", json())
                                                                  : job.other_cpu;
    }
    write_file_atomic(run_dir + "/study_eval.json", e.dump(2) + "\n");
    return true;
  };
  auto exclusive_running = [&] {
    return std::any_of(running.begin(), running.end(),
                       [](const Job& j) { return j.exclusive && j.stage == Job::kTrain; });
  };
  while (next < todo.size() || !running.empty()) {
    if (g_stop && !forwarded) {
      // One SIGINT stops a run at a checkpoint; mpirun passes SIGUSR1 on to every rank (its own
      // SIGINT handling kills the ranks about a second later: stop_signal.h).
      for (const Job& j : running)
        kill(j.pid, j.world > 1 && j.stage == Job::kTrain ? SIGUSR1 : SIGINT);
      forwarded = true;
      std::printf(
          "study: stopping: each run saves a checkpoint; `ledgerlm study run %s` "
          "continues\n",
          dir.c_str());
      std::fflush(stdout);
    }
    while (!g_stop && next < todo.size() && static_cast<int64_t>(running.size()) < jobs &&
           !exclusive_running()) {
      Job job;
      job.name = todo[next].first;
      const json& run = by_name[job.name];
      const std::string run_dir = dir + "/runs/" + job.name;
      if (todo[next].second) {
        job.exclusive = study_is_wall_clock(run);
        if (job.exclusive && !running.empty()) break;  // waits for the machine to be free
        std::printf("study: train %s\n", job.name.c_str());
        job.world = run.value("world", int64_t{1});
        if (job.exclusive) {
          job.loadavg_start = load_average();
          job.busy_start = machine_busy_seconds();
          job.wall_start = std::chrono::steady_clock::now();
        }
        job.pid = spawn(train_argv(manifest, run, dir, job.exclusive ? cores : threads),
                        run_dir + ".log");
      } else {
        start_eval(job, Job::kEvalVal);
      }
      std::fflush(stdout);
      running.push_back(job);
      ++next;
    }
    if (running.empty()) break;
    int status = 0;
    struct rusage usage {};
    const pid_t pid = wait4(-1, &status, 0, &usage);
    if (pid < 0) {
      LLM_REQUIRE(errno == EINTR, "study: waitpid: ", errno_text());
      continue;  // a signal: forward it above
    }
    auto it =
        std::find_if(running.begin(), running.end(), [&](const Job& j) { return j.pid == pid; });
    if (it == running.end()) continue;
    Job job = *it;
    running.erase(it);
    const std::string run_dir = dir + "/runs/" + job.name;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (job.stage != Job::kTrain) {
      bool written = false;
      if (job.stage == Job::kEvalVal) {
        job.val_loss = eval_loss_from_log(run_dir + ".eval.log");
        if (ok && std::isfinite(job.val_loss)) {
          if (!g_stop && report_split(manifest, by_name[job.name], run_dir) == "test") {
            start_eval(job, Job::kEvalTest);
            running.push_back(job);
            continue;
          }
          written = write_eval(job);
        }
      } else {
        written = ok && write_eval(job);
      }
      if (!written && !g_stop)
        std::printf("study: evaluating %s failed (see %s.eval%s.log)\n", job.name.c_str(),
                    run_dir.c_str(), job.stage == Job::kEvalTest ? "_test" : "");
      continue;
    }
    if (job.exclusive) {
      // The load average counts this study's own runs too (a run of every core leaves the next
      // one a 1-minute average near the core count): what other processes took is the machine's
      // busy CPU time during the run minus the run's own (its process tree's user + system time).
      job.loadavg_end = load_average();
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - job.wall_start).count();
      const double own =
          static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
          1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
      const double other = machine_busy_seconds() - job.busy_start - own;
      const double cores = std::max(1u, std::thread::hardware_concurrency());
      if (std::isfinite(other) && wall > 0)
        job.other_cpu = {{"run_cpu_s", own},
                         {"wall_s", wall},
                         {"other_cpu_s", std::max(0.0, other)},
                         {"other_share", std::max(0.0, other) / (wall * cores)}};
    }
    const std::string state = run_state(run_dir);
    if (state == "finished" && !g_stop && steps_objective(manifest) &&
        report_split(manifest, by_name[job.name], run_dir) != "test") {
      write_score(manifest, run_dir);  // steps_to_target: the score needs no evaluation
      continue;
    }
    if (state == "finished" && !g_stop) {
      start_eval(job, Job::kEvalVal);
      running.push_back(job);
      continue;
    }
    if (state == "finished") continue;  // evaluated by the next `study run`
    if (!g_stop || state == "failed")
      std::printf("study: run %s %s (see %s.log)\n", job.name.c_str(),
                  state == "failed" ? "failed" : "did not finish", run_dir.c_str());
    std::fflush(stdout);
  }
  return !g_stop;
}

// What the finals' selection knows of a run: nullopt while pending or not yet evaluated, +inf
// when it failed, else its score: its final loss (the whole-split val loss when evaluated), or with
// steps_to_target its steps to target (+inf when never reached; no evaluation needed).
StudyLossOf loss_in(const json& manifest, const std::string& dir, bool need_eval) {
  const json objective = {{"objective", manifest.value("objective", json("val_loss"))},
                          {"target_loss", manifest.value("target_loss", json())}};
  return [objective, dir, need_eval](const std::string& name) -> std::optional<double> {
    const std::string run_dir = dir + "/runs/" + name;
    const std::string state = run_state(run_dir);
    if (state == "failed") return std::numeric_limits<double>::infinity();
    if (state != "finished") return std::nullopt;
    const bool steps = steps_objective(objective);
    if (!steps && need_eval && !fs::exists(run_dir + "/study_eval.json")) return std::nullopt;
    const double loss = run_score(objective, run_dir);
    return std::isfinite(loss) ? loss : std::numeric_limits<double>::infinity();
  };
}

// Widens each LR sweep whose best point is at an edge by one point there (within its
// lr_max_points); true when the manifest gained runs. A sweep whose every point failed or never
// reached the target has no best to widen from: it is reported once (REPORTED holds its scope).
bool extend_sweeps(json* manifest, const std::string& dir, std::set<std::string>* reported) {
  bool changed = false;
  for (auto& [scope, sweep] : (*manifest)["sweeps"].items()) {
    std::map<int, std::vector<double>> losses;
    for (const json& r : (*manifest)["runs"]) {
      if (!r.contains("sweep") || r["sweep"]["scope"] != scope) continue;
      const std::string run_dir = dir + "/runs/" + r["name"].get<std::string>();
      const std::string state = run_state(run_dir);
      const double loss = state == "finished" ? run_score(*manifest, run_dir)
                                              : std::numeric_limits<double>::infinity();
      losses[r["sweep"]["exponent"].get<int>()].push_back(loss);
    }
    std::map<int, double> median;  // each LR's score over its seeds
    for (const auto& [e, v] : losses) median[e] = study_seed_median(v);
    const bool none = std::none_of(median.begin(), median.end(),
                                   [](const auto& p) { return std::isfinite(p.second); });
    if (none && reported->insert(scope).second)
      std::printf("study: sweep %s: no LR %s: nothing to widen from\n", scope.c_str(),
                  steps_objective(*manifest) ? "reached target_loss" : "finished");
    const int edge = study_sweep_edge(median);
    if (edge == 0) continue;
    const int points =
        sweep["points"].get<int>() + sweep["low"].get<int>() + sweep["high"].get<int>();
    const char* side = edge < 0 ? "low" : "high";
    if (points >= sweep["max_points"].get<int>()) {
      std::printf(
          "study: sweep %s: the best LR is at its %s edge, but lr_max_points (%d) is "
          "reached\n",
          scope.c_str(), side, points);
      continue;
    }
    sweep[side] = sweep[side].get<int>() + 1;
    const double center = sweep["center"];
    std::printf(
        "study: sweep %s: the best LR is at its %s edge; adding LR %g\n", scope.c_str(), side,
        std::ldexp(center, edge < 0 ? median.begin()->first - 1 : median.rbegin()->first + 1));
    changed = true;
  }
  return changed;
}

// `study run DIR --slurm --next`, the job that follows a study's Slurm arrays (study_slurm.h): the
// finished runs' evaluations on this allocation (one at a time, --cpus-per-run threads), then,
// once every run has finished or failed, a sweep widened at its best edge (as `study run` does
// locally). Returns -1 when the submission should go on (the widened runs, finals planned on the
// evaluations, or nothing), else the exit code: 0 while runs of the study are still queued (the
// job after those decides), 1 when runs ended unfinished (resubmitted by hand only, so that a run
// that dies every time cannot loop).
int slurm_next_step(const StudyRunCommand& cmd, json* manifest) {
  fs::create_directories(cmd.dir + "/runs");
  int left_to_slurm = 0;
  run_pending(*manifest, cmd.dir, 1, cmd.cpus_per_run, cmd.ranks_per_run, false, &left_to_slurm);
  if (left_to_slurm > 0) {
    std::printf("study %s: %d run(s) still queued or running: the job after them goes on\n",
                cmd.dir.c_str(), left_to_slurm);
    return 0;
  }
  std::vector<std::string> unfinished;
  for (const json& r : (*manifest)["runs"])
    if (run_state(cmd.dir + "/runs/" + r["name"].get<std::string>()) == "pending")
      unfinished.push_back(r["name"]);
  if (!unfinished.empty()) {
    std::printf(
        "study %s: %zu run(s) ended unfinished (first: %s, see runs/%s/slurm.log): "
        "`ledgerlm study run %s --slurm` submits them again\n",
        cmd.dir.c_str(), unfinished.size(), unfinished[0].c_str(), unfinished[0].c_str(),
        cmd.dir.c_str());
    return 1;
  }
  std::set<std::string> reported;
  if (!(*manifest)["sweeps"].empty() && extend_sweeps(manifest, cmd.dir, &reported)) {
    const std::string study = (*manifest)["study"];
    LLM_REQUIRE(fs::exists(study), "study run: the study file ", study,
                " is gone: cannot widen its LR sweep");
    *manifest = study_plan(study, *manifest);
    study_manifest_write(cmd.dir, *manifest);
  }
  return -1;
}

}  // namespace

int command_study_plan(const StudyPlanCommand& cmd) {
  json previous;
  if (fs::exists(cmd.out_dir + "/manifest.json")) previous = study_manifest_read(cmd.out_dir);
  const json manifest = study_plan(cmd.study_file, previous);
  study_manifest_write(cmd.out_dir, manifest);
  const size_t before = previous.is_object() ? previous["runs"].size() : 0;
  std::printf("study %s: %zu run(s) (%zu new) in %s/manifest.json\n",
              manifest["name"].get<std::string>().c_str(), manifest["runs"].size(),
              manifest["runs"].size() - before, cmd.out_dir.c_str());
  return 0;
}

int command_study_run(const StudyRunCommand& cmd) {
  LLM_REQUIRE(cmd.jobs >= 1, "study run: -j expects >= 1 (got ", cmd.jobs, ")");
  LLM_REQUIRE(!(cmd.slurm && cmd.print_commands),
              "study run: --slurm and --print-commands exclude each other");
  LLM_REQUIRE(cmd.slurm || !cmd.dry_run, "study run: --dry-run goes with --slurm");
  LLM_REQUIRE(cmd.slurm || !cmd.slurm_next, "study run: --next goes with --slurm");
  study_manifest_read(cmd.dir);  // a clear error, before the lock file is made, when none
  // One `study run` at a time on DIR (study_lock.h), held until this command returns; the
  // manifest is read again under the lock (another one may have just widened a sweep).
  const std::unique_ptr<StudyLock> lock =
      StudyLock::acquire(cmd.dir, "ledgerlm study run " + cmd.dir +
                                      (cmd.slurm            ? " --slurm"
                                       : cmd.print_commands ? " --print-commands"
                                                            : " -j " + std::to_string(cmd.jobs)));
  json manifest = study_manifest_read(cmd.dir);
  LLM_REQUIRE(cmd.ranks_per_run >= 0, "study run: --ranks-per-run expects >= 1 (got ",
              cmd.ranks_per_run, "; 0: the ranks the plan gives each run)");
  for (const json& r : manifest["runs"])  // every run checked before anything starts
    study_spread_ranks(manifest, r, cmd.ranks_per_run);
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t threads = std::max<int64_t>(1, cores / cmd.jobs);
  if (cmd.slurm) {
    bool evaluated = false;
    if (cmd.slurm_next) {
      const int rc = slurm_next_step(cmd, &manifest);
      if (rc >= 0) return rc;
      evaluated = true;
    }
    // Finals whose sweep has finished (selected on the whole-split val loss after --next's
    // evaluations; before them on the summaries' windowed val loss, as with --print-commands),
    // then every run neither finished nor queued, as a job array.
    if (study_plan_finals(&manifest, loss_in(manifest, cmd.dir, evaluated)) && !cmd.dry_run)
      study_manifest_write(cmd.dir, manifest);
    StudySlurmRunner runner;
    runner.train_argv = [&](const json& run, int64_t run_threads) {
      return train_argv(manifest, run, cmd.dir, run_threads, false);
    };
    runner.state = [&](const std::string& name) { return run_state(cmd.dir + "/runs/" + name); };
    return study_slurm_submit(cmd, &manifest, runner);
  }
  if (cmd.print_commands) {
    // Finals whose sweep has finished elsewhere (selected on the summaries' windowed val loss
    // when `study run` has not evaluated the runs on the whole split).
    if (study_plan_finals(&manifest, loss_in(manifest, cmd.dir, false)))
      study_manifest_write(cmd.dir, manifest);
    // Runs a Slurm job of the study still holds are left out: printed, they would train twice.
    std::string squeue_error;
    const std::map<std::string, std::string> queue = study_slurm_queue(manifest, &squeue_error);
    LLM_REQUIRE(squeue_error.empty(), "study run --print-commands: squeue failed (", squeue_error,
                "): cannot tell which runs are queued, so nothing was printed");
    int queued = 0;
    for (const json& r : manifest["runs"]) {
      if (run_state(cmd.dir + "/runs/" + r["name"].get<std::string>()) != "pending") continue;
      if (queue.count(r["name"].get<std::string>())) {
        ++queued;
        continue;
      }
      std::string line;
      // Appended piece by piece: `"..." + std::string&&` here trips GCC 12's -Wrestrict false
      // positive (GCC bug 105329) once inlining changes.
      for (const std::string& a : train_argv(
               manifest, study_spread_ranks(manifest, r, cmd.ranks_per_run), cmd.dir, threads)) {
        if (!line.empty()) line += ' ';
        line += shell_quote(a);
      }
      std::printf("%s\n", line.c_str());
    }
    // stderr: stdout stays one command a line (for xargs or a job file).
    if (queued > 0)
      std::fprintf(stderr, "study %s: %d run(s) left out: queued or running in Slurm\n",
                   cmd.dir.c_str(), queued);
    return 0;
  }
  fs::create_directories(cmd.dir + "/runs");
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns so the signal is passed on at once
  struct sigaction old_int {
  }, old_term{};
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  bool done = false;
  int left_to_slurm = 0;
  std::set<std::string> reported;  // sweeps with no best, reported once
  while (true) {
    if (!run_pending(manifest, cmd.dir, cmd.jobs, threads, cmd.ranks_per_run, true, &left_to_slurm))
      break;
    // Sweeps and finals are decided on every run of a sweep: not while Slurm still holds some.
    if (left_to_slurm > 0) break;
    if (manifest["sweeps"].empty() || !extend_sweeps(&manifest, cmd.dir, &reported)) {
      if (study_plan_finals(&manifest, loss_in(manifest, cmd.dir, true))) {
        std::printf("study %s: finals planned:", cmd.dir.c_str());
        for (const auto& [arm, a] : manifest["finals"]["arms"].items())
          if (!a.value("wall_clock", false))
            std::printf(" %s <- %s;", arm.c_str(),
                        a["from"].is_string() ? a["from"].get<std::string>().c_str() : "none");
        std::printf("\n");
        std::fflush(stdout);
        study_manifest_write(cmd.dir, manifest);
        continue;
      }
      // An arm whose every setting failed (or none reached the target) is recorded with a note
      // and no runs: kept in the manifest for the report.
      if (manifest.contains("finals")) study_manifest_write(cmd.dir, manifest);
      done = true;
      break;
    }
    const std::string study = manifest["study"];
    LLM_REQUIRE(fs::exists(study), "study run: the study file ", study,
                " is gone: cannot widen its LR sweep");
    manifest = study_plan(study, manifest);
    study_manifest_write(cmd.dir, manifest);
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (left_to_slurm > 0 && !g_stop) {
    std::printf(
        "study %s: %d run(s) left to Slurm (queued or running: `ledgerlm study status %s`); run "
        "`ledgerlm study run %s` again once they have finished\n",
        cmd.dir.c_str(), left_to_slurm, cmd.dir.c_str(), cmd.dir.c_str());
    return 0;
  }
  if (!done) {
    std::printf("study %s: stopped; run `ledgerlm study run %s` to continue\n", cmd.dir.c_str(),
                cmd.dir.c_str());
    return 130;
  }
  int finished = 0, failed = 0;
  for (const json& r : manifest["runs"]) {
    const std::string state = run_state(cmd.dir + "/runs/" + r["name"].get<std::string>());
    finished += state == "finished";
    failed += state != "finished";
  }
  std::printf("study %s: %d run(s) finished, %d failed or unfinished\n", cmd.dir.c_str(), finished,
              failed);
  return 0;
}

int command_study_report(const StudyReportCommand& cmd) {
  study_manifest_read(cmd.dir);  // a clear error before Python starts
  std::string script = cmd.script;
  if (script.empty()) {
    // Beside the binary: installed under PREFIX/share/ledgerlm, or in the checkout holding the
    // build directory (install_layout.h).
    script = install_find("scripts/study_report.py");
    if (script.empty()) {
      std::string looked;
      for (const std::string& p : install_candidates("scripts/study_report.py"))
        looked += (looked.empty() ? "" : ", ") + p;
      fail(error_message("study report: the report program was not found (looked for ", looked,
                         "; pass --script PATH)"));
    }
  }
  std::string python = cmd.python;
  if (python.empty()) {
    const char* env = std::getenv("LEDGERLM_PYTHON");
    python = env && *env ? env : fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  }
  std::vector<std::string> argv = {python, script, cmd.dir};
  if (!cmd.publish.empty()) argv.insert(argv.end(), {"--publish", cmd.publish});
  if (cmd.allow_dirty) argv.push_back("--allow-dirty");
  if (cmd.allow_mixed) argv.push_back("--allow-mixed-builds");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  LLM_REQUIRE(rc == 0, "study report: cannot start ", python, ": ", std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

}  // namespace ledgerlm
