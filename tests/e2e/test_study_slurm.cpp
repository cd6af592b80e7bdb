// `ledgerlm study run DIR --slurm` without a cluster: sbatch, squeue and scontrol are small
// scripts on PATH that record their arguments and answer as Slurm would. Checked: the job-array
// script (--dry-run: nothing written), the job id recorded in the manifest, a second submission
// leaving the queued runs alone (and --print-commands leaving them out), an array above the
// cluster's MaxArraySize split, --ranks-per-run's micro-batch and ranks, one clear line when
// sbatch is missing or refuses; the next job after an array evaluating the runs, widening the
// sweep and submitting the point it adds; then the
// array script itself run as Slurm would run a task (SLURM_ARRAY_* set): a run it trains equals
// the same run under `study run -j 1` bit for bit, and SIGUSR1 to the task's shell (what
// `--signal=B:USR1@N` sends before the time limit) stops the run at a checkpoint with exit 75,
// the task requeues itself (`scontrol requeue`), and the requeued task resumes it to the same
// bits as an uninterrupted run. tests/slurm/ runs the same against a real slurmctld.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
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

class StudySlurm : public testing::StudyDataSuite<StudySlurm> {
 public:
  static constexpr const char* kPrefix = "ledgerlm_study_slurm_";

 protected:
  // A study of OPTIMIZERS (a TOML array) x 2 seeds of STEPS steps, planned into a new directory.
  static std::string plan(const std::string& name, int steps,
                          const std::string& optimizers = "[\"adamw\", \"sgd\"]") {
    const std::string file = root_ + "/" + name + ".toml", dir = root_ + "/" + name;
    write_file(file, "name = \"" + name + "\"\nconfig = \"" + testing::source_dir() +
                         "/configs/tiny_test.toml\"\n[base]\n\"data.dir\" = \"" + root_ +
                         "/data\"\n\"train.max_steps\" = " + std::to_string(steps) +
                         "\n\"train.eval_interval\" = 10\n\"optim.warmup_steps\" = 2\n"
                         "[axes]\n\"optim.name\" = " +
                         optimizers +
                         "\n"
                         "\"train.seed\" = [1, 2]\n\"optim.lr\" = 3e-3\n");
    const CommandResult r = study("plan " + file + " --out " + dir);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return dir;
  }

  static CommandResult study(const std::string& args, const std::string& path_prefix = "") {
    return run_command((path_prefix.empty() ? "" : "PATH=" + path_prefix + ":$PATH ") +
                       testing::ledgerlm_binary() + " study " + args);
  }

  // A folder of fake Slurm commands: sbatch records its arguments (sbatch.args) and prints the
  // next job id from 4711 (or fails with SBATCH_ERROR when that file exists), squeue prints
  // squeue.out, scontrol records its arguments (scontrol.args) and answers `show config` with
  // scontrol.config.
  static std::string fake_slurm(const std::string& name) {
    const std::string bin = root_ + "/" + name;
    fs::create_directories(bin);
    write_file(bin + "/sbatch",
               "#!/bin/sh\nd=$(dirname \"$0\")\necho \"$@\" >> \"$d/sbatch.args\"\n"
               "if [ -e \"$d/SBATCH_ERROR\" ]; then cat \"$d/SBATCH_ERROR\" >&2; exit 1; fi\n"
               "n=$(cat \"$d/next\" 2>/dev/null || echo 4711); echo $((n + 1)) > \"$d/next\"\n"
               "echo \"$n\"\n");
    write_file(bin + "/squeue", "#!/bin/sh\ncat \"$(dirname \"$0\")/squeue.out\" 2>/dev/null\n");
    write_file(bin + "/scontrol",
               "#!/bin/sh\nd=$(dirname \"$0\")\n"
               "if [ \"$1 $2\" = \"show config\" ]; then cat \"$d/scontrol.config\" 2>/dev/null; "
               "exit 0; fi\necho \"$@\" >> \"$d/scontrol.args\"\n");
    for (const char* f : {"sbatch", "squeue", "scontrol"})
      fs::permissions(bin + "/" + f, fs::perms::owner_all);
    return bin;
  }
};

TEST_F(StudySlurm, DryRunPrintsTheArrayScriptAndWritesNothing) {
  const std::string dir = plan("dry", 4);
  const std::string before = read_file(dir + "/manifest.json");
  const CommandResult r =
      study("run " + dir +
                " --slurm --dry-run --max-parallel 2 --time 00:10:00 --partition cpu "
                "--cpus-per-run 3 --stop-ahead 90 --sbatch-arg=--qos=low",
            "/nonexistent");  // no sbatch needed to look
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* want :
       {"#SBATCH --array=0-3%2\n", "#SBATCH --ntasks=1\n", "#SBATCH --cpus-per-task=3\n",
        "#SBATCH --time=00:10:00\n", "#SBATCH --partition=cpu\n", "#SBATCH --signal=B:USR1@90\n",
        "#SBATCH --requeue\n", "  0) name=adamw_seed1 cmd=(", "  3) name=sgd_seed2 cmd=(",
        "--train.threads 3", "touch \"$run_dir/STOP\"' USR1", "if [ \"$rc\" -eq 75 ]; then",
        "scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"",
        "# sbatch --parsable --qos=low "})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  EXPECT_EQ(read_file(dir + "/manifest.json"), before);
  EXPECT_FALSE(fs::exists(dir + "/slurm"));
}

TEST_F(StudySlurm, SubmitRecordsTheJobAndResubmitsOnlyWhatLeftTheQueue) {
  const std::string dir = plan("submit", 4);
  const std::string bin = fake_slurm("fake_submit");
  const CommandResult r = study("run " + dir + " --slurm --sbatch-arg=--qos=low", bin);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("submitted 4 run(s) of 1 rank(s) as Slurm job 4711"), std::string::npos)
      << r.output;
  const json m = json::parse(read_file(dir + "/manifest.json"));
  const json& job = m["slurm"]["jobs"][0];
  EXPECT_EQ(job["job"], "4711");
  EXPECT_EQ(job["runs"], json({"adamw_seed1", "adamw_seed2", "sgd_seed1", "sgd_seed2"}));
  const std::string script = job["script"];
  EXPECT_TRUE(fs::exists(script));
  // Then the job after the array (evaluations, sweeps, finals, the next submission).
  ASSERT_EQ(m["slurm"]["jobs"].size(), 2u) << m.dump(2);
  const json& next = m["slurm"]["jobs"][1];
  EXPECT_EQ(next["job"], "4712");
  EXPECT_EQ(next["runs"], json::array());
  const std::string next_script = next["script"];
  EXPECT_EQ(read_file(bin + "/sbatch.args"),
            "--parsable --qos=low " + script +
                "\n--parsable --dependency=afterany:4711 --qos=low " + next_script + "\n");
  EXPECT_NE(read_file(next_script).find(" study run " + dir + " --slurm --next --cpus-per-run 1"),
            std::string::npos)
      << read_file(next_script);

  // Everything still queued: nothing to submit, no second copy of any run.
  write_file(bin + "/squeue.out",
             "4711 0 RUNNING\n4711 1 PENDING\n4711 2 PENDING\n4711 3 PENDING\n9 0 RUNNING\n");
  const CommandResult again = study("run " + dir + " --slurm", bin);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("nothing to submit (0 finished, 0 failed, 4 queued or running)"),
            std::string::npos)
      << again.output;
  const CommandResult status = study("status " + dir, bin);
  EXPECT_NE(status.output.find(": 4 run(s): 1 running, 3 queued\n"), std::string::npos)
      << status.output;
  // A local `study run` leaves them to Slurm too (and decides no sweep or finals meanwhile).
  const CommandResult local = study("run " + dir + " -j 1", bin);
  ASSERT_EQ(local.exit_code, 0) << local.output;
  EXPECT_NE(local.output.find("4 run(s) left to Slurm"), std::string::npos) << local.output;
  EXPECT_FALSE(fs::exists(dir + "/runs/adamw_seed1/metrics.jsonl"));

  // Task 1 finished, task 3 left the queue unfinished (a node failure): only task 3's run goes.
  fs::create_directories(dir + "/runs/adamw_seed2");
  write_file(dir + "/runs/adamw_seed2/summary.json", R"({"summary": true, "status": "finished"})");
  write_file(bin + "/squeue.out", "4711 0 RUNNING\n4711 2 PENDING\n");
  const CommandResult third = study("run " + dir + " --slurm", bin);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("submitted 1 run(s) of 1 rank(s) as Slurm job 4713"),
            std::string::npos)
      << third.output;
  const json m3 = json::parse(read_file(dir + "/manifest.json"));
  ASSERT_EQ(m3["slurm"]["jobs"].size(), 4u);
  EXPECT_EQ(m3["slurm"]["jobs"][2]["runs"], json({"sgd_seed2"}));
}

TEST_F(StudySlurm, PrintCommandsLeavesOutRunsSlurmHolds) {
  // Two runs of a recorded job still in the queue: printed, they would train twice.
  const std::string dir = plan("printq", 4);
  json m = json::parse(read_file(dir + "/manifest.json"));
  m["slurm"]["jobs"] = {
      {{"job", "4711"}, {"runs", {"adamw_seed1", "adamw_seed2", "sgd_seed1", "sgd_seed2"}}}};
  write_file(dir + "/manifest.json", m.dump(2));
  const std::string bin = fake_slurm("fake_printq");
  write_file(bin + "/squeue.out", "4711 0 RUNNING\n4711 2 PENDING\n");
  const CommandResult r = study("run " + dir + " --print-commands", bin);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("--train.name adamw_seed1 "), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("--train.name sgd_seed1 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--train.name adamw_seed2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("--train.name sgd_seed2 "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(": 2 run(s) left out: queued or running in Slurm\n"), std::string::npos)
      << r.output;
}

TEST_F(StudySlurm, ArrayLargerThanMaxArraySizeIsSplit) {
  // MaxArraySize 3: task ids 0-2, so 4 runs go as two arrays, and the next job waits for both.
  const std::string dir = plan("maxarray", 4);
  const std::string bin = fake_slurm("fake_maxarray");
  write_file(bin + "/scontrol.config",
             "Configuration data as of 2026-01-01T00:00:00\nMaxArraySize            = 3\n"
             "MaxJobCount             = 10000\n");
  const CommandResult r = study("run " + dir + " --slurm", bin);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json m = json::parse(read_file(dir + "/manifest.json"));
  ASSERT_EQ(m["slurm"]["jobs"].size(), 3u) << m.dump(2);
  EXPECT_EQ(m["slurm"]["jobs"][0]["runs"], json({"adamw_seed1", "adamw_seed2", "sgd_seed1"}));
  EXPECT_EQ(m["slurm"]["jobs"][1]["runs"], json({"sgd_seed2"}));
  EXPECT_NE(read_file(m["slurm"]["jobs"][0]["script"]).find("#SBATCH --array=0-2\n"),
            std::string::npos);
  EXPECT_NE(read_file(m["slurm"]["jobs"][1]["script"]).find("#SBATCH --array=0-0\n"),
            std::string::npos);
  EXPECT_NE(read_file(bin + "/sbatch.args").find("--dependency=afterany:4711:4712 "),
            std::string::npos)
      << read_file(bin + "/sbatch.args");
  // Both arrays' tasks count as queued: nothing is submitted twice.
  write_file(bin + "/squeue.out",
             "4711 0 PENDING\n4711 1 PENDING\n4711 2 PENDING\n4712 0 PENDING\n");
  const CommandResult again = study("run " + dir + " --slurm", bin);
  EXPECT_NE(again.output.find("nothing to submit (0 finished, 0 failed, 4 queued or running)"),
            std::string::npos)
      << again.output;
}

TEST_F(StudySlurm, RanksPerRunSpreadsTheMicroBatchOverTheRanks) {
  // tiny_test.toml: world 1 x micro-batch 8. Two ranks of 4 each, as one task of 2 Slurm tasks.
  const std::string dir = plan("ranks", 4);
  const CommandResult r =
      study("run " + dir + " --slurm --dry-run --ranks-per-run 2 --cpus-per-run 3", "/nonexistent");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* want :
       {"#SBATCH --ntasks=2\n", "#SBATCH --cpus-per-task=3\n", "cmd=(mpirun -np 2 ",
        "--train.micro_batch 4 ", "--train.threads 3)", "--ranks-per-run 2 "})
    EXPECT_NE(r.output.find(want), std::string::npos) << want << "\n" << r.output;
  // Locally too: the same mpirun line.
  const CommandResult printed = study("run " + dir + " --print-commands --ranks-per-run 2");
  EXPECT_NE(printed.output.find("mpirun -np 2 "), std::string::npos) << printed.output;
  // 8 sequences per micro-batch step cannot go to 3 ranks: one line, nothing written.
  const CommandResult bad = study("run " + dir + " --slurm --dry-run --ranks-per-run 3");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_EQ(bad.output,
            "ledgerlm: error: study run: --ranks-per-run 3: run adamw_seed1: its 8 sequences per "
            "micro-batch step (world 1 x micro-batch 8) cannot be shared by 3 ranks: expected a "
            "divisor of 8\n");
}

TEST_F(StudySlurm, MissingOrRefusingSbatchIsOneLine) {
  const std::string dir = plan("refused", 4);
  const std::string before = read_file(dir + "/manifest.json");
  const CommandResult none = run_command("PATH=/nonexistent " + testing::ledgerlm_binary() +
                                         " study run " + dir + " --slurm");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_EQ(none.output,
            "ledgerlm: error: study run --slurm: sbatch not found on PATH (run it on a Slurm "
            "login node, or pass --dry-run to see the job script)\n");
  const std::string bin = fake_slurm("fake_refusing");
  write_file(bin + "/SBATCH_ERROR",
             "sbatch: error: invalid partition specified: gpu\n"
             "sbatch: error: Batch job submission failed: Invalid partition name specified\n");
  const CommandResult refused = study("run " + dir + " --slurm --partition gpu", bin);
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_EQ(refused.output,
            "ledgerlm: error: study run --slurm: sbatch refused the job (exit 1): sbatch: error: "
            "invalid partition specified: gpu\n");
  EXPECT_EQ(read_file(dir + "/manifest.json"), before);
  EXPECT_TRUE(!fs::exists(dir + "/slurm") || fs::is_empty(dir + "/slurm"));
}

// Runs array task TASK of DIR's recorded job JOB (its index in the manifest) as slurmd would (bash,
// SLURM_ARRAY_* set) with the fake scontrol on PATH; returns the pid of its shell.
pid_t start_task(const std::string& dir, int task, const std::string& bin, const std::string& log,
                 size_t job = 0) {
  const json m = json::parse(read_file(dir + "/manifest.json"));
  const std::string script = m["slurm"]["jobs"][job]["script"];
  return testing::start_background(
      "env PATH=" + bin +
          ":$PATH SLURM_ARRAY_JOB_ID=" + std::string(m["slurm"]["jobs"][job]["job"]) +
          " SLURM_ARRAY_TASK_ID=" + std::to_string(task) + " bash " + script,
      log);
}

TEST_F(StudySlurm, ArrayTaskEqualsLocalRunAndRequeuesAfterUsr1) {
  // Local -j 1 gives each run every core as threads: the tasks get as many (--cpus-per-run).
  const std::string cores = std::to_string(std::max(1u, std::thread::hardware_concurrency()));
  const std::string local = plan("local", 300, "[\"adamw\"]"),
                    slurm = plan("tasks", 300, "[\"adamw\"]");
  const CommandResult ran = study("run " + local + " -j 1");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  const std::string bin = fake_slurm("fake_tasks");
  const CommandResult sub = study("run " + slurm + " --slurm --cpus-per-run " + cores, bin);
  ASSERT_EQ(sub.exit_code, 0) << sub.output;

  // Task 0 straight through: exit 0, no requeue, the same losses as the local run.
  int status = testing::wait_exit(start_task(slurm, 0, bin, root_ + "/task0.log"), 120);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << read_file(root_ + "/task0.log") << read_file(slurm + "/runs/adamw_seed1/slurm.log");
  EXPECT_FALSE(fs::exists(bin + "/scontrol.args"));
  EXPECT_EQ(testing::clean_losses(slurm + "/runs/adamw_seed1"),
            testing::clean_losses(local + "/runs/adamw_seed1"));

  // Task 1: SIGUSR1 to the shell mid-run, as Slurm sends it ahead of the time limit.
  const std::string run = slurm + "/runs/adamw_seed2";
  const pid_t shell = start_task(slurm, 1, bin, root_ + "/task1.log");
  ASSERT_TRUE(testing::wait_loss_records(run, 3, 60)) << read_file(run + "/slurm.log");
  ASSERT_EQ(kill(shell, SIGUSR1), 0);
  status = testing::wait_exit(shell, 60);
  const std::string log = read_file(run + "/slurm.log");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << log;
  EXPECT_NE(log.find("stopped by STOP file"), std::string::npos) << log;
  EXPECT_EQ(read_file(bin + "/scontrol.args"), "requeue 4711_1\n");
  EXPECT_EQ(json::parse(read_file(run + "/summary.json"))["status"], "stopped");
  const size_t stopped_at = testing::loss_records(run);
  EXPECT_LT(stopped_at, 300u) << "the run finished before the signal: nothing was tested";
  const CommandResult st = study("status " + slurm, bin);
  EXPECT_NE(st.output.find("adamw_seed2  stopped: STOP file"), std::string::npos) << st.output;

  // The requeued task: resumes from the checkpoint and ends as the uninterrupted local run.
  status = testing::wait_exit(start_task(slurm, 1, bin, root_ + "/task1b.log"), 120);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(run + "/slurm.log");
  EXPECT_NE(read_file(run + "/slurm.log").find("resumed from"), std::string::npos);
  EXPECT_EQ(testing::clean_losses(run), testing::clean_losses(local + "/runs/adamw_seed2"));
  EXPECT_EQ(read_file(run + "/model.safetensors"),
            read_file(local + "/runs/adamw_seed2/model.safetensors"));
}

TEST_F(StudySlurm, NextJobEvaluatesWidensTheSweepAndSubmitsWhatItAdds) {
  // Five steps from LRs far below AdamW's best (as in test_study.cpp's sweep test): each higher
  // LR lowers the loss, so the job after the array widens the sweep at its top edge.
  const std::string file = root_ + "/next.toml", dir = root_ + "/next";
  write_file(file, "config = \"" + testing::source_dir() +
                       "/configs/tiny_test.toml\"\n[base]\n\"data.dir\" = \"" + root_ +
                       "/data\"\n\"train.max_steps\" = 5\n\"train.eval_interval\" = 5\n"
                       "\"optim.warmup_steps\" = 1\n[axes]\n\"optim.name\" = [\"adamw\"]\n"
                       "lr = \"sweep\"\nlr_center = 1e-5\nlr_points = 5\nlr_max_points = 6\n");
  ASSERT_EQ(study("plan " + file + " --out " + dir).exit_code, 0);
  const std::string bin = fake_slurm("fake_next");
  const CommandResult sub = study("run " + dir + " --slurm", bin);
  ASSERT_EQ(sub.exit_code, 0) << sub.output;
  // The array's tasks, then the job after it, as Slurm starts them.
  auto run_array = [&](size_t job, int tasks) {
    for (int t = 0; t < tasks; ++t) {
      const int status =
          testing::wait_exit(start_task(dir, t, bin, root_ + "/next_task.log", job), 60);
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
          << read_file(root_ + "/next_task.log");
    }
  };
  auto run_next = [&](size_t job) {
    const json m = json::parse(read_file(dir + "/manifest.json"));
    EXPECT_EQ(m["slurm"]["jobs"][job].value("next", false), true) << m.dump(2);
    return run_command("env PATH=" + bin + ":$PATH bash " +
                       m["slurm"]["jobs"][job]["script"].get<std::string>());
  };
  run_array(0, 5);
  const CommandResult next = run_next(1);
  ASSERT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("best LR is at its high edge; adding LR 8e-05"), std::string::npos)
      << next.output;
  EXPECT_NE(next.output.find("submitted 1 run(s) of 1 rank(s) as Slurm job 4713"),
            std::string::npos)
      << next.output;
  const json m = json::parse(read_file(dir + "/manifest.json"));
  ASSERT_EQ(m["slurm"]["jobs"].size(), 4u) << m.dump(2);
  EXPECT_EQ(m["slurm"]["jobs"][2]["runs"], json({"adamw_lr8e-05"}));
  for (const json& r : m["runs"]) {
    const std::string name = r["name"];
    if (name == "adamw_lr8e-05") continue;
    EXPECT_TRUE(json::parse(read_file(dir + "/runs/" + name + "/study_eval.json"))
                    .contains("full_val_loss"))
        << name;
  }

  // The added run, then the job after it: the sweep is at lr_max_points, nothing more to submit.
  run_array(2, 1);
  const CommandResult last = run_next(3);
  ASSERT_EQ(last.exit_code, 0) << last.output;
  EXPECT_NE(last.output.find("lr_max_points (6) is reached"), std::string::npos) << last.output;
  EXPECT_NE(last.output.find("nothing to submit (6 finished, 0 failed, 0 queued or running)"),
            std::string::npos)
      << last.output;
  EXPECT_TRUE(fs::exists(dir + "/runs/adamw_lr8e-05/study_eval.json"));
  EXPECT_EQ(json::parse(read_file(dir + "/manifest.json"))["slurm"]["jobs"].size(), 4u);
}

}  // namespace
}  // namespace ledgerlm
