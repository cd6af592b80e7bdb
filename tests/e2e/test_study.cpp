// `ledgerlm study`: a study of 2 optimizers x 2 LRs x 2 seeds (tiny model, a few dozen steps)
// planned, its `study run` stopped by SIGINT mid-way and run again, against the same study run
// without a stop: the same manifest and bit-identical final losses (a stopped run saves a
// checkpoint and resumes from it exactly; the order of operations is the same by construction).
// --print-commands lists the unfinished runs' `ledgerlm train` lines; an LR sweep whose best
// point is at its top edge gains a point there and stops at lr_max_points; `study report` writes
// REPORT.md from the finished runs. The two smoke studies of configs/studies end to end are in
// test_study_smoke_slow.cpp. About 10 s on 2 cores.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/process_test_support.h"
#include "tests/support/study_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

using namespace testing::study_test_names;

class Study : public testing::StudyDataSuite<Study> {
 public:
  static constexpr const char* kPrefix = "ledgerlm_study_";

 protected:
  // The study file: the tiny config, 2 optimizers with their own LRs, 2 seeds.
  static std::string study_file(int steps) {
    const std::string path = root_ + "/study" + std::to_string(steps) + ".toml";
    write_file(path, "name = \"tiny\"\nconfig = \"" + testing::source_dir() +
                         "/configs/tiny_test.toml\"\nbaseline = \"adamw_lr0.003\"\n"
                         "[base]\n\"data.dir\" = \"" +
                         root_ + "/data\"\n\"train.max_steps\" = " + std::to_string(steps) +
                         "\n\"train.eval_interval\" = 10\n\"optim.warmup_steps\" = 2\n"
                         "[axes]\n\"optim.name\" = [\"adamw\", \"sgd\"]\n"
                         "\"train.seed\" = [1, 2]\n\"optim.lr\" = [3e-3, 1e-2]\n"
                         "[grid.sgd]\n\"optim.lr\" = [0.1, 0.3]\n");
    return path;
  }

  static CommandResult study(const std::string& args) {
    return run_command(testing::ledgerlm_binary() + " study " + args);
  }

  // Starts `ledgerlm study run DIR -j JOBS` in the background (its output to LOG) and waits up
  // to 60 s for run RUN to write its first metrics: the pid of the study run.
  static pid_t start_study_run(const std::string& dir, int jobs, const std::string& run,
                               const std::string& log) {
    const pid_t pid = testing::start_background(
        testing::ledgerlm_binary() + " study run " + dir + " -j " + std::to_string(jobs), log);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!fs::exists(dir + "/runs/" + run + "/metrics.jsonl") &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return pid;
  }

  static json summary(const std::string& dir, const std::string& name) {
    return json::parse(read_file(dir + "/runs/" + name + "/summary.json"));
  }
};

TEST_F(Study, StoppedAndResumedEqualsUninterrupted) {
  const std::string file = study_file(40);
  const std::string a = root_ + "/interrupted", b = root_ + "/straight";
  ASSERT_EQ(study("plan " + file + " --out " + a).exit_code, 0);
  const CommandResult plan_b = study("plan " + file + " --out " + b);
  ASSERT_EQ(plan_b.exit_code, 0) << plan_b.output;
  EXPECT_NE(plan_b.output.find("8 run(s) (8 new)"), std::string::npos) << plan_b.output;
  const json manifest = json::parse(read_file(a + "/manifest.json"));
  ASSERT_EQ(manifest["runs"].size(), 8u);

  // Stop the study while its third run trains (two at a time: the last ones never start). Every
  // `study run` here takes -j 2, so every run trains on the same number of threads (a different
  // count sums in another order: not bit-identical).
  const std::string third = manifest["runs"][2]["name"];
  const std::string log = root_ + "/interrupted.log";
  const pid_t pid = start_study_run(a, 2, third, log);
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << read_file(log);
  EXPECT_NE(read_file(log).find("stopped; run `ledgerlm study run"), std::string::npos);
  const std::string last = manifest["runs"][7]["name"];
  EXPECT_FALSE(fs::exists(a + "/runs/" + last + "/summary.json")) << "the stop came too late";

  // What is left, as commands: the unfinished runs only, each a `ledgerlm train` line.
  const CommandResult cmds = study("run " + a + " --print-commands");
  ASSERT_EQ(cmds.exit_code, 0) << cmds.output;
  EXPECT_NE(cmds.output.find(" train --config "), std::string::npos) << cmds.output;
  EXPECT_NE(cmds.output.find("--train.name " + last), std::string::npos) << cmds.output;
  EXPECT_EQ(cmds.output.find("--train.name " + std::string(manifest["runs"][0]["name"]) + " "),
            std::string::npos)
      << "a finished run is listed: " << cmds.output;

  const CommandResult resumed = study("run " + a + " -j 2");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const CommandResult straight = study("run " + b + " -j 2");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_NE(straight.output.find("8 run(s) finished, 0 failed"), std::string::npos);
  EXPECT_EQ(read_file(a + "/manifest.json"), read_file(b + "/manifest.json"));
  for (const json& r : manifest["runs"]) {
    const std::string name = r["name"];
    const json sa = summary(a, name), sb = summary(b, name);
    EXPECT_EQ(sa["status"], "finished") << name;
    EXPECT_EQ(sa["steps"], 40) << name;
    EXPECT_EQ(sa["final_loss"], sb["final_loss"]) << name;
    EXPECT_EQ(sa["final_val_loss"], sb["final_val_loss"]) << name;
    const json ea = json::parse(read_file(a + "/runs/" + name + "/study_eval.json"));
    const json eb = json::parse(read_file(b + "/runs/" + name + "/study_eval.json"));
    EXPECT_EQ(ea, eb) << name;
    EXPECT_TRUE(ea["full_val_loss"].is_number()) << name;
  }
  // The report: every run finished, an interval per arm, the comparison with the baseline.
  // --allow-dirty: a checkout with uncommitted changes builds a binary whose runs say so, and
  // the report refuses them without it (a clean checkout, as in CI, needs no flag).
  const CommandResult rep = study("report --allow-dirty " + a);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(a + "/REPORT.md");
  // Provenance: the runs record the build that trained them, which the report names.
  const json build = summary(a, manifest["runs"][0]["name"])["build"];
  ASSERT_TRUE(build.is_object()) << summary(a, manifest["runs"][0]["name"]).dump();
  const std::string commit = build["commit"];
  const std::string trained = commit == "unknown"
                                  ? "- Trained by: no run records the commit"
                                  : "- Trained by: " + commit.substr(0, 12) + " (8 runs)";
  EXPECT_NE(md.find(trained), std::string::npos) << md;
  EXPECT_NE(md.find("from 8 of 8 planned runs"), std::string::npos) << md;
  EXPECT_NE(md.find("whole val split"), std::string::npos) << md;
  EXPECT_NE(md.find("| sgd_lr0.3 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("arm minus `adamw_lr0.003`"), std::string::npos) << md;
  EXPECT_TRUE(md.find("**Winner: ") != std::string::npos ||
              md.find("**No winner at this n**") != std::string::npos)
      << md;
  EXPECT_TRUE(fs::exists(a + "/lr_sensitivity.png"));

  // Nothing is left to do: a new `study run` trains nothing and prints no command.
  EXPECT_EQ(study("run " + a + " --print-commands").output, "");
  EXPECT_EQ(study("run " + a).output.find("study: train"), std::string::npos);
}

TEST_F(Study, SweepWidensAtItsBestEdgeUpToItsLimit) {
  // Five steps from LRs far below AdamW's best: each higher LR lowers the loss, so the best
  // point stays at the top edge and the sweep grows there until lr_max_points (6).
  const std::string file = root_ + "/sweep.toml";
  write_file(file, "config = \"" + testing::source_dir() +
                       "/configs/tiny_test.toml\"\n[base]\n\"data.dir\" = \"" + root_ +
                       "/data\"\n\"train.max_steps\" = 5\n\"train.eval_interval\" = 5\n"
                       "\"optim.warmup_steps\" = 1\n[axes]\n\"optim.name\" = [\"adamw\"]\n"
                       "lr = \"sweep\"\nlr_center = 1e-5\nlr_points = 5\nlr_max_points = 6\n");
  const std::string dir = root_ + "/sweep";
  ASSERT_EQ(study("plan " + file + " --out " + dir).exit_code, 0);
  const CommandResult r = study("run " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("best LR is at its high edge; adding LR 8e-05"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("lr_max_points (6) is reached"), std::string::npos) << r.output;
  const json m = json::parse(read_file(dir + "/manifest.json"));
  ASSERT_EQ(m["runs"].size(), 6u);
  EXPECT_EQ(m["runs"][5]["name"], "adamw_lr8e-05");
  EXPECT_EQ(m["sweeps"]["adamw"]["high"], 1);
  EXPECT_EQ(summary(dir, "adamw_lr8e-05")["status"], "finished");
  // Planning the file again keeps the widened sweep.
  ASSERT_EQ(study("plan " + file + " --out " + dir).exit_code, 0);
  EXPECT_EQ(json::parse(read_file(dir + "/manifest.json")), m);
}

TEST_F(Study, BadInputIsOneLine) {
  const CommandResult no_manifest = study("run " + root_ + "/nothing_here");
  EXPECT_NE(no_manifest.exit_code, 0);
  EXPECT_NE(no_manifest.output.find("no manifest.json (plan it first"), std::string::npos)
      << no_manifest.output;
  const CommandResult no_file = study("plan " + root_ + "/missing.toml --out " + root_ + "/m");
  EXPECT_NE(no_file.exit_code, 0);
  EXPECT_NE(no_file.output.find("study file '"), std::string::npos) << no_file.output;
  EXPECT_FALSE(fs::exists(root_ + "/m/manifest.json"));
}

// Two `study run`s on one directory: the second is refused at once in one line naming the
// first (pid and command), and changes nothing; the first goes on and stops normally.
TEST_F(Study, SecondStudyRunOnOneDirectoryIsRefused) {
  const std::string dir = root_ + "/locked";
  ASSERT_EQ(study("plan " + study_file(100000) + " --out " + dir).exit_code, 0);
  const json manifest = json::parse(read_file(dir + "/manifest.json"));
  const std::string first = manifest["runs"][0]["name"];
  const std::string log = root_ + "/locked.log";
  const pid_t pid = start_study_run(dir, 1, first, log);
  const std::string before = read_file(dir + "/manifest.json");
  // (A timeout: without the lock the second one would train the long runs itself.)
  const CommandResult second =
      run_command("timeout 30 " + testing::ledgerlm_binary() + " study run " + dir + " -j 1");
  EXPECT_NE(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("ledgerlm: error: study '" + dir + "' is in use by pid " +
                               std::to_string(pid)),
            std::string::npos)
      << second.output;
  EXPECT_NE(second.output.find("ledgerlm study run " + dir + " -j 1"), std::string::npos)
      << second.output;
  EXPECT_EQ(std::count(second.output.begin(), second.output.end(), '\n'), 1) << second.output;
  EXPECT_EQ(read_file(dir + "/manifest.json"), before);
  EXPECT_FALSE(fs::exists(dir + "/runs/" + std::string(manifest["runs"][1]["name"])));
  kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 130) << read_file(log);
  // The lock went with the first: `--print-commands` (which takes it too) runs now.
  EXPECT_EQ(study("run " + dir + " --print-commands").exit_code, 0);
}

// A manifest edited by hand (or written by another tool) names runs that would live outside
// runs/ or read as options: refused in one line before anything is written.
TEST_F(Study, ManifestRunNamesLeavingRunsAreRefused) {
  int i = 0;
  for (const std::string bad : {"../escape", "a/b", "", "-j"}) {
    const std::string dir = root_ + "/badname" + std::to_string(i++);
    fs::create_directories(dir);
    const json m = {{"format", 1},
                    {"config", ""},
                    {"runs", json::array({{{"name", bad},
                                           {"world", 1},
                                           {"axes", json::object()},
                                           {"overrides", {{"train.max_steps", "2"}}}}})}};
    ASSERT_TRUE(write_file(dir + "/manifest.json", m.dump()));
    const CommandResult r = study("run " + dir);
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_EQ(r.output.rfind("ledgerlm: error: " + dir + "/manifest.json: runs[0]", 0), 0)
        << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
    EXPECT_FALSE(fs::exists(dir + "/escape") || fs::exists(dir + "/escape.log")) << bad;
    EXPECT_FALSE(fs::exists(dir + "/runs")) << bad;
  }
}

// `study status`: one run in each state, the queued one from a fake squeue on PATH that lists its
// array task as PENDING; then the total line. Without squeue on PATH (no Slurm) it still works.
TEST_F(Study, StatusShowsEachRunsState) {
  const std::string dir = root_ + "/status";
  const std::vector<std::string> names = {"done", "stop", "fail", "busy", "queued", "fresh"};
  json runs = json::array();
  for (const std::string& n : names)
    runs.push_back(
        {{"name", n}, {"world", 1}, {"axes", json::object()}, {"overrides", json::object()}});
  const json m = {
      {"format", 1},
      {"config", ""},
      {"runs", runs},
      {"slurm", {{"jobs", json::array({{{"job", "4242"}, {"runs", {"fresh", "queued"}}}})}}}};
  fs::create_directories(dir + "/runs");
  ASSERT_TRUE(write_file(dir + "/manifest.json", m.dump()));
  auto summary = [&](const std::string& name, const json& fields) {
    fs::create_directories(dir + "/runs/" + name);
    json s = {{"summary", true}};
    s.update(fields);
    ASSERT_TRUE(write_file(dir + "/runs/" + name + "/summary.json", s.dump()));
  };
  summary("done", {{"status", "finished"}});
  summary("stop", {{"status", "stopped"}, {"stopped", "signal SIGUSR1"}});
  summary("fail", {{"status", "failed"}, {"failed", "non-finite loss at step 3"}});
  fs::create_directories(dir + "/runs/busy");
  const int fd = ::open((dir + "/runs/busy/.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // as a training job holds its run
  const std::string bin_dir = root_ + "/fake_slurm";
  fs::create_directories(bin_dir);
  // squeue --noheader --array --me --format='%F %K %T': task 1 of job 4242 waits; 4243 is
  // someone else's job.
  ASSERT_TRUE(
      write_file(bin_dir + "/squeue", "#!/bin/sh\necho '4242 1 PENDING'\necho '4243 0 RUNNING'\n"));
  fs::permissions(bin_dir + "/squeue", fs::perms::owner_all);
  const CommandResult r = run_command("PATH=" + bin_dir + ":$PATH " + testing::ledgerlm_binary() +
                                      " study status " + dir);
  ::close(fd);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<std::string> want = {
      "done    finished\n",
      "stop    stopped: signal SIGUSR1\n",
      "fail    failed: non-finite loss at step 3\n",
      "busy    running\n",
      "queued  queued: PENDING\n",
      "fresh   not started\n",
      "study " + dir +
          ": 6 run(s): 1 finished, 1 running, 1 queued, 1 stopped, 1 failed, 1 not started\n"};
  std::string expected;
  for (const std::string& line : want) expected += line;
  EXPECT_EQ(r.output, expected);
  // No Slurm at all: the queued run is one not started, the lock released: busy not started.
  const CommandResult plain =
      run_command("PATH=/nonexistent " + testing::ledgerlm_binary() + " study status " + dir);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_NE(plain.output.find("queued  not started\n"), std::string::npos) << plain.output;
  EXPECT_NE(plain.output.find(": 6 run(s): 1 finished, 1 stopped, 1 failed, 3 not started\n"),
            std::string::npos)
      << plain.output;
}

}  // namespace
}  // namespace ledgerlm
