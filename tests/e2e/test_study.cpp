// `ledgerlm study`: a study of 2 optimizers x 2 LRs x 2 seeds (tiny model, a few dozen steps)
// planned, its `study run` stopped by SIGINT mid-way and run again, against the same study run
// without a stop: the same manifest and bit-identical final losses (a stopped run saves a
// checkpoint and resumes from it exactly; the order of operations is the same by construction).
// --print-commands lists the unfinished runs' `ledgerlm train` lines; an LR sweep whose best
// point is at its top edge gains a point there and stops at lr_max_points; `study report` writes
// REPORT.md from the finished runs; configs/studies/optimizers_smoke.toml runs end to end, and
// `compare --tsv` tabulates two of its runs. About 10 s on 2 cores.
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

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::CommandResult;
using testing::read_file;
using testing::run_command;
using testing::write_file;

class Study : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::make_study_data_dir("ledgerlm_study_");
    ASSERT_FALSE(root_.empty());
  }

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

  static std::string root_;
};

std::string Study::root_;

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

// configs/studies/optimizers_smoke.toml as CI runs it: on this test's corpus with a test split
// (its data.dir line replaced), planned, run (the sweep, then the finals with three fresh seeds
// reported on the test split, then the wall-clock finals alone), reported. About 10 s.
TEST_F(Study, OptimizersSmokeStudyRunsAndReports) {
  const std::string data = root_ + "/data_with_test";
  const CommandResult prep =
      run_command(testing::ledgerlm_binary() + " prepare --input " + root_ + "/corpus.txt --out " +
                  data + " --tokenizer bytes --test-fraction 0.1");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  std::string text = read_file(testing::source_dir() + "/configs/studies/optimizers_smoke.toml");
  const size_t at = text.find("\"data.dir\" = \"data_out/kjv\"");
  ASSERT_NE(at, std::string::npos) << "the smoke study no longer sets data.dir as expected";
  text.replace(at, std::string("\"data.dir\" = \"data_out/kjv\"").size(),
               "\"data.dir\" = \"" + data + "\"");
  text.replace(text.find("../tiny_test.toml"), std::string("../tiny_test.toml").size(),
               testing::source_dir() + "/configs/tiny_test.toml");
  const std::string file = root_ + "/optimizers_smoke.toml", dir = root_ + "/smoke";
  ASSERT_TRUE(write_file(file, text));
  const CommandResult plan = study("plan " + file + " --out " + dir);
  ASSERT_EQ(plan.exit_code, 0) << plan.output;
  EXPECT_NE(plan.output.find("12 run(s)"), std::string::npos) << plan.output;
  const CommandResult run = study("run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  // 12 sweep runs, 3 optimizers x 3 fresh seeds, and as many for 0.5 s each.
  EXPECT_NE(run.output.find("30 run(s) finished, 0 failed"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("finals planned: adamw <- adamw_lr"), std::string::npos) << run.output;
  const json manifest = json::parse(read_file(dir + "/manifest.json"));
  int finals = 0, wall = 0;
  for (const json& r : manifest["runs"]) {
    if (!r.contains("phase")) continue;
    ++finals;
    const std::string name = r["name"];
    const json e = json::parse(read_file(dir + "/runs/" + name + "/study_eval.json"));
    EXPECT_EQ(e["split"], "test") << name;
    EXPECT_TRUE(e["full_test_loss"].is_number() && e["full_val_loss"].is_number()) << name;
    EXPECT_NE(e["full_test_loss"], e["full_val_loss"]) << name;
    if (!r.value("wall_clock", false)) continue;
    ++wall;
    EXPECT_EQ(e["seconds_asked"], 0.5) << name;
    EXPECT_EQ(e["loadavg_start"].size(), 3u) << name;
    // What other processes took of the CPUs while it trained: a share of the machine, and the
    // run's own CPU time (its process tree's) at most what every core could give it.
    const json& other = e["other_cpu"];
    ASSERT_TRUE(other["other_share"].is_number()) << name << ": " << e.dump();
    EXPECT_GE(other["other_share"].get<double>(), 0.0) << name;
    EXPECT_LE(other["other_share"].get<double>(), 1.0) << name;
    EXPECT_GT(other["run_cpu_s"].get<double>(), 0.0) << name;
  }
  EXPECT_EQ(finals, 18);
  EXPECT_EQ(wall, 9);
  const CommandResult rep = study("report --allow-dirty " + dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(dir + "/REPORT.md");
  EXPECT_NE(md.find("# Study optimizers_smoke"), std::string::npos) << md;
  EXPECT_NE(md.find("## Finals"), std::string::npos) << md;
  EXPECT_NE(md.find("compared on the full test split"), std::string::npos) << md;
  EXPECT_NE(md.find("arm minus `adamw`"), std::string::npos) << md;
  EXPECT_NE(md.find("arm minus `adamw_wall0.5s`"), std::string::npos) << md;
  EXPECT_NE(md.find("| sgd_lr0.3 | 2 |"), std::string::npos) << md;
  EXPECT_NE(md.find("## Cost per optimizer"), std::string::npos) << md;
  EXPECT_TRUE(fs::exists(dir + "/finals_val_curves.png"));

  // `compare --tsv`: a header, then one row per run, the keys that differ and the summary's
  // figures as summary.json holds them (the same text: JSON numbers printed back exactly).
  const std::string r1 = dir + "/runs/adamw_lr0.01_seed1", r2 = dir + "/runs/lion_lr0.003_seed2";
  const CommandResult tsv =
      run_command(testing::ledgerlm_binary() + " compare --tsv " + r1 + " " + r2 + " 2>&1");
  ASSERT_EQ(tsv.exit_code, 0) << tsv.output;
  std::vector<std::vector<std::string>> rows;
  std::istringstream lines(tsv.output);
  for (std::string line; std::getline(lines, line);) {
    rows.emplace_back();
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, '\t');) rows.back().push_back(cell);
  }
  ASSERT_EQ(rows.size(), 3u) << tsv.output;
  auto column = [&](const std::string& name) {
    const auto it = std::find(rows[0].begin(), rows[0].end(), name);
    return it == rows[0].end() ? -1 : static_cast<int>(it - rows[0].begin());
  };
  for (const char* key : {"optim.lr", "optim.name", "optim.weight_decay", "train.seed"})
    EXPECT_GE(column(key), 0) << key << " is not a column: " << tsv.output;
  EXPECT_EQ(column("train.max_steps"), -1) << "a key that does not differ: " << tsv.output;
  ASSERT_GE(column("final_val_loss"), 0) << tsv.output;
  EXPECT_EQ(rows[1].size(), rows[0].size());
  EXPECT_EQ(rows[1][0], "adamw_lr0.01_seed1");
  EXPECT_EQ(rows[2][column("optim.name")], "lion");
  EXPECT_EQ(rows[1][column("status")], "finished");
  EXPECT_EQ(rows[2][column("final_val_loss")],
            json::parse(read_file(r2 + "/summary.json"))["final_val_loss"].dump());
}

// configs/studies/global_batch_smoke.toml as CI runs it: the LR carried from G = 4 by each rule
// and the warmup a tenth of each run's steps, as the runs' config.toml record them. About 5 s.
TEST_F(Study, GlobalBatchSmokeStudyScalesTheLrByItsRule) {
  std::string text = read_file(testing::source_dir() + "/configs/studies/global_batch_smoke.toml");
  const std::string data_line = "\"data.dir\" = \"data_out/kjv\"";
  const size_t at = text.find(data_line);
  ASSERT_NE(at, std::string::npos) << "the smoke study no longer sets data.dir as expected";
  text.replace(at, data_line.size(), "\"data.dir\" = \"" + root_ + "/data\"");
  text.replace(text.find("../tiny_test.toml"), std::string("../tiny_test.toml").size(),
               testing::source_dir() + "/configs/tiny_test.toml");
  const std::string file = root_ + "/global_batch_smoke.toml", dir = root_ + "/gb_smoke";
  ASSERT_TRUE(write_file(file, text));
  ASSERT_EQ(study("plan " + file + " --out " + dir).exit_code, 0);
  const CommandResult run = study("run " + dir + " -j 2");
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("18 run(s) finished, 0 failed"), std::string::npos) << run.output;
  // G = 16 = 4 x the base batch: linear 4 x 1e-2, sqrt 2 x 1e-2; 16384 / (16 x 32) = 32 steps,
  // warmup round(3.2) = 3. The trainer's resolved config records what the run trained with.
  const std::string lin = read_file(dir + "/runs/b1x8x2_lr-linear_seed1/config.toml");
  EXPECT_NE(lin.find("\nlr = 0.04\n"), std::string::npos) << lin;
  EXPECT_NE(lin.find("warmup_steps = 3\n"), std::string::npos) << lin;
  EXPECT_NE(lin.find("accum = 2"), std::string::npos) << lin;
  const std::string sq = read_file(dir + "/runs/b1x8x2_lr-sqrt_seed2/config.toml");
  EXPECT_NE(sq.find("\nlr = 0.02\n"), std::string::npos) << sq;
  const std::string fixed = read_file(dir + "/runs/b1x8x2_lr-fixed_seed2/config.toml");
  EXPECT_NE(fixed.find("\nlr = 0.01\n"), std::string::npos) << fixed;
  const CommandResult rep = study("report --allow-dirty " + dir);
  ASSERT_EQ(rep.exit_code, 0) << rep.output;
  const std::string md = read_file(dir + "/REPORT.md");
  EXPECT_NE(md.find("arm minus `b1x4x1_lr-fixed`"), std::string::npos) << md;
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
