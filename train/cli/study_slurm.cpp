// Slurm job arrays for studies (see study_slurm.h).
#include "train/cli/study_slurm.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <set>
#include <sstream>

#include "model/base/atomic_file.h"
#include "model/base/check.h"
#include "train/cli/install_layout.h"
#include "train/cli/study_plan.h"
#include "train/run/stop_signal.h"

namespace ledgerlm {
namespace {

using json = nlohmann::json;

// Whether PROGRAM is an executable file in a directory of $PATH.
bool on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':'))
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
  return false;
}

// Runs COMMAND through the shell; its output (stdout and stderr) and exit status.
std::pair<std::string, int> capture(const std::string& command) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  LLM_REQUIRE(p != nullptr, "cannot run ", command, ": ", errno_text());
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  return {text, WIFEXITED(status) ? WEXITSTATUS(status) : 128};
}

std::string join_quoted(const std::vector<std::string>& argv) {
  std::string line;
  for (const std::string& a : argv) {
    if (!line.empty()) line += ' ';
    line += study_shell_quote(a);
  }
  return line;
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The array task's script. Task i trains the i-th run of RUNS (name, `ledgerlm train` argv) with
// its output appended to runs/NAME/slurm.log. Slurm sends the batch shell SIGUSR1 `stop_ahead`
// seconds before the time limit (--signal=B:USR1@N), or `scancel --batch --signal=USR1` does;
// the trap passes it on to the run as its STOP file (runs/NAME/STOP), which every rank honours
// after the step it is in (agreed by all-reduce), saving a checkpoint and exiting kExitStopped.
// A file, not the signal itself: Slurm may send the signal up to a minute early (its event
// resolution), even before the trainer has installed its handlers, where SIGUSR1's default
// action would kill it; a STOP file present at the start stops the run after its first step.
// The task then requeues itself, and the requeued task resumes the run (--resume auto) bit for
// bit. A run killed before its first checkpoint (metrics.jsonl, no ckpt/step_*) starts over.
std::string array_script(const StudyRunCommand& cmd, const std::string& dir,
                         const std::string& job_name,
                         const std::vector<std::pair<std::string, std::vector<std::string>>>& runs,
                         int64_t world) {
  std::string s = "#!/bin/bash\n";
  s += "# Written by `ledgerlm study run " + dir + " --slurm`: array task i trains run i below.\n";
  auto directive = [&](const std::string& d) { s += "#SBATCH " + d + "\n"; };
  directive("--job-name=" + job_name);
  std::string array = "--array=0-" + std::to_string(runs.size() - 1);
  if (cmd.max_parallel > 0) array += "%" + std::to_string(cmd.max_parallel);
  directive(array);
  directive("--ntasks=" + std::to_string(world));
  directive("--cpus-per-task=" + std::to_string(cmd.cpus_per_run));
  if (!cmd.time.empty()) directive("--time=" + cmd.time);
  if (!cmd.partition.empty()) directive("--partition=" + cmd.partition);
  directive("--signal=B:USR1@" + std::to_string(cmd.stop_ahead));
  directive("--requeue");
  directive("--open-mode=append");
  directive("--output=" + dir + "/slurm/%A_%a.out");
  s += "set -u\n";
  s += "case \"$SLURM_ARRAY_TASK_ID\" in\n";
  for (size_t i = 0; i < runs.size(); ++i)
    s += "  " + std::to_string(i) + ") name=" + study_shell_quote(runs[i].first) + " cmd=(" +
         join_quoted(runs[i].second) + ") ;;\n";
  s += "  *) echo \"no run for array task $SLURM_ARRAY_TASK_ID\" >&2; exit 2 ;;\nesac\n";
  s += "run_dir=" + study_shell_quote(dir + "/runs") + "/$name\n";
  s += "mkdir -p \"$run_dir\"\n";
  s += "log=$run_dir/slurm.log\n";
  s += "echo \"== slurm job ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID} on $(hostname), restart "
       "${SLURM_RESTART_COUNT:-0}, $(date -u +%FT%TZ)\" >> \"$log\"\n";
  s += "how=(--resume auto)\n";
  s += "if [ -e \"$run_dir/metrics.jsonl\" ] && ! compgen -G \"$run_dir/ckpt/step_*\" > "
       "/dev/null; then\n  how=(--train.overwrite true)\nfi\n";
  s += "trap 'echo \"== SIGUSR1: stop at the next step\" >> \"$log\"; touch \"$run_dir/STOP\"' "
       "USR1\n";
  s += "\"${cmd[@]}\" \"${how[@]}\" >> \"$log\" 2>&1 &\n";
  s += "child=$!\n";
  // `wait` returns early when the trap runs: wait again until the run has exited; the last
  // `wait` on the reaped child gives its exit status.
  s += "while ! wait \"$child\" && kill -0 \"$child\" 2>/dev/null; do :; done\n";
  s += "wait \"$child\"; rc=$?\n";
  // A finished run leaves no STOP file behind (a signal that came as it ended).
  s += "[ \"$rc\" -eq 0 ] && rm -f \"$run_dir/STOP\"\n";
  s += "echo \"== exit $rc\" >> \"$log\"\n";
  // `scontrol requeue` ends this task at once: nothing may come after it.
  s += "if [ \"$rc\" -eq " + std::to_string(kExitStopped) + " ]; then\n";
  s += "  echo \"== stopped at a checkpoint: requeue\" >> \"$log\"\n";
  s += "  scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\" >> \"$log\" 2>&1\n";
  s += "fi\n";
  s += "exit \"$rc\"\n";
  return s;
}

// The script of the job that follows a submission's arrays (sbatch --dependency=afterany on them,
// on the sbatch line): `ledgerlm study run DIR --slurm --next` with this submission's flags. A
// dependent job rather than a step inside the array's tasks: the evaluations need only finished
// runs, but sweep widening and finals need every run of a sweep, which no single task sees end;
// afterany waits for every task, requeued ones included, and holds no node meanwhile.
std::string next_script(const StudyRunCommand& cmd, const std::string& dir,
                        const std::string& job_name) {
  std::string s = "#!/bin/bash\n";
  s += "# Written by `ledgerlm study run " + dir +
       " --slurm`: after its arrays, evaluations, sweeps, finals, and the next submission.\n";
  auto directive = [&](const std::string& d) { s += "#SBATCH " + d + "\n"; };
  directive("--job-name=" + job_name + "-next");
  directive("--ntasks=1");
  directive("--cpus-per-task=" + std::to_string(cmd.cpus_per_run));
  if (!cmd.time.empty()) directive("--time=" + cmd.time);
  if (!cmd.partition.empty()) directive("--partition=" + cmd.partition);
  directive("--open-mode=append");
  directive("--output=" + dir + "/slurm/next_%j.out");
  std::vector<std::string> argv = {self_exe(), "study", "run", dir, "--slurm", "--next"};
  for (const auto& [flag, value] :
       {std::pair<const char*, int64_t>{"--cpus-per-run", cmd.cpus_per_run},
        {"--ranks-per-run", cmd.ranks_per_run},
        {"--max-parallel", cmd.max_parallel},
        {"--stop-ahead", cmd.stop_ahead}})
    argv.insert(argv.end(), {flag, std::to_string(value)});
  if (!cmd.time.empty()) argv.insert(argv.end(), {"--time", cmd.time});
  if (!cmd.partition.empty()) argv.insert(argv.end(), {"--partition", cmd.partition});
  for (const std::string& a : cmd.sbatch_args) argv.push_back("--sbatch-arg=" + a);
  s += "exec " + join_quoted(argv) + "\n";
  return s;
}

// The cluster's MaxArraySize (`scontrol show config`): an array's task ids run from 0 to one below
// it. Slurm's default, 1001, when scontrol is not on PATH or does not say.
int64_t max_array_size() {
  constexpr int64_t kSlurmDefault = 1001;
  if (!on_path("scontrol")) return kSlurmDefault;
  const auto [out, rc] = capture("scontrol show config");
  if (rc != 0) return kSlurmDefault;
  std::stringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::stringstream fields(line);
    std::string key, eq;
    int64_t value = 0;
    if (fields >> key >> eq >> value && key == "MaxArraySize" && eq == "=" && value >= 1)
      return value;
  }
  return kSlurmDefault;
}

// The first line of TEXT that says "error", else its first line.
std::string error_line(const std::string& text) {
  std::stringstream lines(text);
  std::string line, first;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    if (first.empty()) first = line;
    if (line.find("error") != std::string::npos) return line;
  }
  return first.empty() ? "no output" : first;
}

}  // namespace

int study_slurm_submit(const StudyRunCommand& cmd, json* manifest, const StudySlurmRunner& runner) {
  LLM_REQUIRE(cmd.cpus_per_run >= 1, "study run --slurm: --cpus-per-run expects >= 1 (got ",
              cmd.cpus_per_run, ")");
  LLM_REQUIRE(cmd.max_parallel >= 0, "study run --slurm: --max-parallel expects >= 0 (got ",
              cmd.max_parallel, ")");
  LLM_REQUIRE(cmd.stop_ahead >= 1, "study run --slurm: --stop-ahead expects >= 1 second (got ",
              cmd.stop_ahead, ")");
  if (!cmd.dry_run)
    LLM_REQUIRE(on_path("sbatch"),
                "study run --slurm: sbatch not found on PATH (run it on a Slurm login node, or "
                "pass --dry-run to see the job script)");
  const std::string dir = std::filesystem::absolute(cmd.dir).lexically_normal().string();
  std::string squeue_error;
  const std::map<std::string, std::string> queue = study_slurm_queue(*manifest, &squeue_error);
  LLM_REQUIRE(squeue_error.empty(), "study run --slurm: squeue failed (", squeue_error,
              "): cannot tell which runs are queued, so nothing was submitted");
  // Runs to submit, by rank count (an array's tasks share one allocation shape).
  std::map<int64_t, std::vector<std::pair<std::string, std::vector<std::string>>>> todo;
  int finished = 0, failed = 0, queued = 0, count = 0;
  for (const json& r : (*manifest)["runs"]) {
    const std::string name = r["name"];
    const std::string state = runner.state(name);
    finished += state == "finished";
    failed += state == "failed";
    if (state != "pending") continue;
    if (queue.count(name)) {
      ++queued;
      continue;
    }
    const json run = study_spread_ranks(*manifest, r, cmd.ranks_per_run);
    const int64_t world = run.value("world", int64_t{1});
    todo[world].push_back({name, runner.train_argv(run, cmd.cpus_per_run * world)});
    ++count;
  }
  if (todo.empty()) {
    std::printf("study %s: nothing to submit (%d finished, %d failed, %d queued or running)\n",
                cmd.dir.c_str(), finished, failed, queued);
    return 0;
  }
  const std::string job_name =
      "ledgerlm-" + study_filesystem_safe(manifest->value("name", std::string("study")));
  json& slurm = (*manifest)["slurm"];
  if (!slurm.is_object()) slurm = json::object();
  if (!slurm.contains("jobs") || !slurm["jobs"].is_array()) slurm["jobs"] = json::array();
  // An array larger than the cluster allows is cut into several, each its own submission (and
  // each with its own %K throttle).
  const size_t max_tasks = static_cast<size_t>(max_array_size());
  std::vector<std::pair<int64_t, std::vector<std::pair<std::string, std::vector<std::string>>>>>
      arrays;
  for (const auto& [world, all] : todo)
    for (size_t at = 0; at < all.size(); at += max_tasks)
      arrays.push_back(
          {world,
           {all.begin() + static_cast<std::ptrdiff_t>(at),
            all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), at + max_tasks))}});
  size_t serial = slurm["jobs"].size();
  std::vector<std::string> submitted;  // job ids
  // sbatch SBATCH (the script at SCRIPT_PATH): the job id, or one line with sbatch's error (the
  // script removed: nothing refers to it).
  auto submit = [](const std::vector<std::string>& sbatch, const std::string& script_path) {
    const auto [out, rc] = capture(join_quoted(sbatch));
    if (rc != 0) {
      std::error_code ec;
      std::filesystem::remove(script_path, ec);
      fail(error_message("study run --slurm: sbatch refused the job (exit ", rc,
                         "): ", error_line(out)));
    }
    // --parsable: "JOBID" or "JOBID;CLUSTER" on the last line (warnings may come before it).
    std::string last;
    std::stringstream lines(out);
    for (std::string line; std::getline(lines, line);)
      if (!line.empty()) last = line;
    const std::string job = last.substr(0, last.find(';'));
    LLM_REQUIRE(!job.empty() && job.find_first_not_of("0123456789") == std::string::npos,
                "study run --slurm: sbatch printed no job id (", error_line(out), ")");
    return job;
  };
  for (const auto& [world, runs] : arrays) {
    const std::string script_path =
        dir + "/slurm/array" + std::to_string(++serial) + "_ranks" + std::to_string(world) + ".sh";
    const std::string script = array_script(cmd, dir, job_name, runs, world);
    std::vector<std::string> sbatch = {"sbatch", "--parsable"};
    sbatch.insert(sbatch.end(), cmd.sbatch_args.begin(), cmd.sbatch_args.end());
    sbatch.push_back(script_path);
    if (cmd.dry_run) {
      std::printf("# %s\n%s# %s\n", script_path.c_str(), script.c_str(),
                  join_quoted(sbatch).c_str());
      continue;
    }
    std::filesystem::create_directories(dir + "/slurm");
    write_file_atomic(script_path, script);
    std::filesystem::permissions(script_path, std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
    const std::string job = submit(sbatch, script_path);
    submitted.push_back(job);
    json names = json::array();
    for (const auto& r : runs) names.push_back(r.first);
    slurm["jobs"].push_back({{"job", job},
                             {"runs", names},
                             {"ranks", world},
                             {"script", script_path},
                             {"submitted", utc_now()}});
    study_manifest_write(cmd.dir, *manifest);
    std::printf("study %s: submitted %zu run(s) of %lld rank(s) as Slurm job %s (%s)\n",
                cmd.dir.c_str(), runs.size(), static_cast<long long>(world), job.c_str(),
                script_path.c_str());
  }
  // The job after them, once every array of this submission has ended.
  {
    const std::string script_path = dir + "/slurm/next" + std::to_string(++serial) + ".sh";
    const std::string script = next_script(cmd, dir, job_name);
    std::string after = "afterany";
    for (const std::string& job : submitted) after += ":" + job;
    if (cmd.dry_run) after += ":JOB";
    std::vector<std::string> sbatch = {"sbatch", "--parsable", "--dependency=" + after};
    sbatch.insert(sbatch.end(), cmd.sbatch_args.begin(), cmd.sbatch_args.end());
    sbatch.push_back(script_path);
    if (cmd.dry_run) {
      std::printf("# %s\n%s# %s\n", script_path.c_str(), script.c_str(),
                  join_quoted(sbatch).c_str());
      return 0;
    }
    write_file_atomic(script_path, script);
    std::filesystem::permissions(script_path, std::filesystem::perms::owner_exec,
                                 std::filesystem::perm_options::add);
    const std::string job = submit(sbatch, script_path);
    slurm["jobs"].push_back({{"job", job},
                             {"runs", json::array()},
                             {"next", true},
                             {"after", submitted},
                             {"script", script_path},
                             {"submitted", utc_now()}});
    study_manifest_write(cmd.dir, *manifest);
    std::printf(
        "study %s: then Slurm job %s (after them): evaluations, sweeps, finals, the "
        "next submission\n",
        cmd.dir.c_str(), job.c_str());
  }
  if (!cmd.dry_run)
    std::printf(
        "study %s: %d run(s) submitted, %d finished, %d failed, %d already queued; "
        "`ledgerlm study status %s` follows them\n",
        cmd.dir.c_str(), count, finished, failed, queued, cmd.dir.c_str());
  return 0;
}

std::string study_shell_quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,+%@") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool study_slurm_is_queued(const std::string& state) {
  static const std::set<std::string> queued = {"PENDING",     "REQUEUED",    "REQUEUE_HOLD",
                                               "REQUEUE_FED", "CONFIGURING", "RESV_DEL_HOLD",
                                               "SUSPENDED",   "STOPPED"};
  return queued.count(state) > 0;
}

std::map<std::string, std::string> study_slurm_queue(const json& manifest, std::string* error) {
  std::map<std::string, std::string> out;
  if (!manifest.contains("slurm") || !manifest["slurm"].is_object()) return out;
  const json& jobs = manifest["slurm"].value("jobs", json::array());
  if (!jobs.is_array() || jobs.empty() || !on_path("squeue")) return out;
  // job id -> its array's runs, task index = position.
  std::map<std::string, std::vector<std::string>> runs_of;
  for (const json& j : jobs) {
    if (!j.is_object() || !j.contains("job") || !j.contains("runs")) continue;
    std::vector<std::string>& runs = runs_of[j["job"].get<std::string>()];
    for (const json& r : j["runs"]) runs.push_back(r.get<std::string>());
  }
  // Every job of this user, one line per array task: jobs that left the queue are simply absent
  // (asking for them by id makes squeue fail once Slurm has forgotten them).
  FILE* p = ::popen("squeue --noheader --array --me --format='%F %K %T' 2>&1", "r");
  if (p == nullptr) return out;
  std::string text;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  const int status = ::pclose(p);
  if (status != 0) {
    if (error) *error = text.substr(0, text.find('\n'));
    return out;
  }
  std::stringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::stringstream fields(line);
    std::string job, task, state;
    if (!(fields >> job >> task >> state)) continue;
    const auto it = runs_of.find(job);
    if (it == runs_of.end()) continue;
    char* end = nullptr;
    const long index = std::strtol(task.c_str(), &end, 10);
    if (end == task.c_str() || *end != '\0' || index < 0 ||
        static_cast<size_t>(index) >= it->second.size())
      continue;  // "N/A" (the job itself, not an array task) or a task range still pending
    out[it->second[static_cast<size_t>(index)]] = state;
  }
  return out;
}

}  // namespace ledgerlm
