// No job of several ranks waits forever, and no waiting rank spins (train/comm/comm_watch.h):
//   - rank 1 SIGSTOPped mid-training (world 2, ZeRO-2, dist.timeout_s 3): the job ends within
//     the bound with exit 1 and one line naming rank 1 and the phase, rank 0's summary.json says
//     "failed" with that line, no process of the job is left (the stopped rank included), and
//     the last checkpoint resumes bit for bit like an uninterrupted run;
//   - rank 1 stopping itself (LEDGERLM_TEST_STOP_IN) as it begins reading its config, as it
//     enters start-up (reading the data), an evaluation, a weights save or a checkpoint save, each
//     at step 2: the same bound, one line naming rank 1 and that phase, no process left; a failed
//     start-up leaves no run directory, and a later phase's failure is in summary.json (and no
//     checkpoint half-written);
//   - rank 1 paused 3 s at a step (LEDGERLM_TEST_PAUSE_AT): rank 0 waits for it sleeping (under
//     half a core; the busy-wait it replaced used a whole one), the run finishes, and the header
//     states the timeout rule with the configured value;
//   - an Error on rank 1 alone (LEDGERLM_TEST_FAIL_AT): one line, and rank 0 records the failed
//     run in summary.json (rank 1 used to end the job before rank 0 could write anything);
//   - dist.timeout_s 0 is refused by name;
//   - dist.comm = nccl on the CPU is refused once for the job; auto runs on MPI, recorded.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/dist_test_support.h"
#include "tests/support/resume_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using Clock = std::chrono::steady_clock;

// A live process of a job: its pid, state letter (R, S, T: stopped, ...) and MPI rank (-1 for
// mpirun itself, whose environment has no rank).
struct JobProcess {
  int pid = -1;
  char state = '?';
  int rank = -1;
};

// Every live process whose command line contains `marker` (zombies have no command line left).
std::vector<JobProcess> job_processes(const std::string& marker) {
  std::vector<JobProcess> out;
  for (const fs::directory_entry& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = testing::read_file("/proc/" + pid + "/cmdline");
    for (char& c : cmdline)
      if (c == '\0') c = ' ';
    if (cmdline.find(marker) == std::string::npos || std::stoi(pid) == ::getpid()) continue;
    JobProcess p;
    p.pid = std::stoi(pid);
    const std::string stat = testing::read_file("/proc/" + pid + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size()) p.state = stat[paren + 2];
    std::string env = testing::read_file("/proc/" + pid + "/environ");
    std::istringstream vars(env);
    for (std::string var; std::getline(vars, var, '\0');)
      if (var.rfind("OMPI_COMM_WORLD_RANK=", 0) == 0) p.rank = std::stoi(var.substr(21));
    if (p.state != 'Z') out.push_back(p);
  }
  return out;
}

// utime + stime of a process, in seconds.
double cpu_seconds(int pid) {
  const std::string stat = testing::read_file("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));
  std::string field;
  double ticks = 0.0;
  for (int i = 3; i <= 15 && in >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

nlohmann::json read_summary(const std::string& run_dir) {
  return nlohmann::json::parse(testing::read_file(run_dir + "/summary.json"), nullptr, false);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class DistWatchdog : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (testing::mpirun_path().empty()) return;
    std::string text;
    for (int i = 0; i < 400; ++i)
      text += "The voice of one crying in the wilderness, verse " + std::to_string(i) + ".\n";
    data_ = testing::resume_prepare_corpus("ledgerlm_dist_watchdog_", text);
    out_ = fs::path(data_).parent_path().string() + "/runs";
  }
  // A constant LR (a resumed run and an uninterrupted one share one schedule), dropout on (its
  // random stream must resume too), a checkpoint every 2 steps.
  static std::string flags(const std::string& name, int steps) {
    return testing::resume_tiny_flags(data_, out_, name) + " --train.max_steps " +
           std::to_string(steps) +
           " --dist.zero 2 --ckpt.interval 2 --optim.schedule constant --optim.warmup_steps 0"
           " --model.dropout 0.1";
  }
  static std::string dir(const std::string& name) { return out_ + "/" + name; }
  // What the command line of every process of run `name` contains.
  static std::string marker(const std::string& name) {
    return "--train.out_dir " + out_ + " --train.name " + name + " ";
  }
  // `mpirun -np 2 ledgerlm train ARGS`, with a test hook ("NAME=VALUE") passed to the ranks.
  static std::string train(const std::string& args, const std::string& hook = "") {
    const std::string var = hook.substr(0, hook.find('='));
    return (hook.empty() ? "" : hook + " ") + testing::mpirun_prefix(2) +
           (hook.empty() ? "" : "-x " + var + " ") + testing::ledgerlm_binary() + " train" + args;
  }
  // Ends whatever is left of a job that a failed expectation left behind.
  static void kill_job(const std::string& name) {
    for (const JobProcess& p : job_processes(marker(name))) ::kill(p.pid, SIGKILL);
  }
  // Fails the test on whatever of job `name` is still alive a few seconds after it ended, the
  // stopped rank included (mpirun kills it: SIGKILL ends a stopped process; its exit is reaped by
  // init shortly after mpirun's), then kills it.
  static void expect_nothing_left(const std::string& name) {
    std::vector<JobProcess> left = job_processes(marker(name));
    for (int i = 0; i < 50 && !left.empty(); ++i) {
      testing::run_command("sleep 0.1");
      left = job_processes(marker(name));
    }
    for (const JobProcess& p : left)
      ADD_FAILURE() << "left behind: pid " << p.pid << " state " << p.state << " rank " << p.rank;
    kill_job(name);
  }
  // The job's one error line, which must name rank 1 as the one that did not arrive ("" if not).
  static std::string timeout_line(const std::string& log) {
    EXPECT_EQ(count(log, "ledgerlm: error:"), 1) << log;
    const size_t at = log.find("ledgerlm: error: rank 1 did not take part in the ");
    EXPECT_NE(at, std::string::npos) << log;
    if (at == std::string::npos) return "";
    const std::string line = log.substr(at, log.find('\n', at) - at);
    std::printf("%s\n", line.c_str());
    return line;
  }
  static std::string data_, out_;
};
std::string DistWatchdog::data_, DistWatchdog::out_;

// The bound: the limit the line states (dist.timeout_s 3, or more on a slow machine: see
// stated_limit) + the census's 1 s grace + mpirun ending the ranks (SIGTERM, then SIGKILL a
// second later) come to ~5 s at a limit of 3 s (measured 4.0-5.2 s); the limit + 17 s leaves
// room for a loaded machine and is far from a hang.
constexpr double kBoundSlackSeconds = 17.0;

// The limit a timeout line states, checked against the reason it gives. The rule
// (train/comm/comm_watch.h) is max(dist.timeout_s, 5 x the slowest step, evaluation or save so
// far): with dist.timeout_s 3 a fast machine states "within 3 s (WHERE; dist.timeout_s = 3)",
// while a slow one (a sanitizer build on a loaded machine, steps of 0.7 s and more) states
// "within 3.5 s (WHERE; 5 x the slowest step so far (0.7 s), above dist.timeout_s = 3)". Both
// are what the code guarantees, so both pass; the stated limit must then equal what its reason
// says to the 3 digits printed. WHERE must be `where`. Returns the limit, or -1 (with a failure)
// when the line says anything else.
double stated_limit(const std::string& line, const std::string& where) {
  static const std::regex form(
      R"( within ([0-9.e+]+) s \((.*?); (dist\.timeout_s = 3|5 x the slowest (step|evaluation|weights save|checkpoint save) )"
      R"(so far \(([0-9.e+]+) s\), above dist\.timeout_s = 3)\); ending the job$)");
  std::smatch m;
  if (!std::regex_search(line, m, form)) {
    ADD_FAILURE() << "not a timeout line of the rule's form: " << line;
    return -1;
  }
  EXPECT_EQ(m[2].str(), where) << line;
  const double limit = std::stod(m[1].str());
  if (m[5].matched) {
    const double slowest = std::stod(m[5].str());
    EXPECT_GT(limit, 3.0) << "a floor above dist.timeout_s is named only when it is higher: "
                          << line;
    EXPECT_NEAR(limit, 5 * slowest, 5 * slowest * 5e-3 + 5e-3) << "5 x the slowest: " << line;
  } else {
    EXPECT_EQ(limit, 3.0) << line;
  }
  return limit;
}

TEST_F(DistWatchdog, StoppedRankIsNamedNothingIsLeftAndTheLastCheckpointResumesBitwise) {
  LEDGERLM_REQUIRE_MPI();
  const std::string name = "stopped";
  testing::Background job = testing::start_background(
      train(flags(name, 100000) + " --dist.timeout_s 3"), out_ + "/bg_" + name);
  ASSERT_GT(job.pid, 0);
  ASSERT_TRUE(testing::wait_for_step(dir(name), 4, 60)) << job.log();
  int victim = -1;
  for (const JobProcess& p : job_processes(marker(name)))
    if (p.rank == 1) victim = p.pid;
  ASSERT_GT(victim, 0) << "rank 1's process";
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  const auto t0 = Clock::now();
  const int rc = job.wait(60);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (rc == -1) kill_job(name);
  ASSERT_NE(rc, -1) << "the job still ran 60 s after rank 1 stopped:\n" << job.log();
  std::printf("job ended %.1f s after rank 1 was stopped (dist.timeout_s 3)\n", seconds);
  EXPECT_NE(rc, 0);
  const std::string log = job.log();
  const std::string line = timeout_line(log);
  ASSERT_FALSE(line.empty());
  // The phase and step it names are wherever rank 1 was stopped (a step, or a save after one):
  // read them back from the line.
  std::smatch step;
  ASSERT_TRUE(std::regex_search(line, step, std::regex(R"(\(([a-z ]+ step [0-9]+);)")))
      << "the phase and step: " << line;
  const double limit = stated_limit(line, step[1].str());
  EXPECT_LT(seconds, limit + kBoundSlackSeconds);
  expect_nothing_left(name);  // the stopped rank included
  // Rank 0 recorded the failed run.
  const nlohmann::json summary = read_summary(dir(name));
  ASSERT_TRUE(summary.is_object()) << "no summary.json";
  EXPECT_EQ(summary.value("status", ""), "failed");
  EXPECT_EQ("ledgerlm: error: " + summary.value("failed", ""), line);

  // The last complete checkpoint resumes; three steps later everything equals an uninterrupted
  // run of the same length, bit for bit (same world and stage: the same sums in the same order).
  const CheckpointReader ckpt = CheckpointReader::open(checkpoint_resolve(dir(name)));
  ckpt.verify_all();
  const int end = static_cast<int>(ckpt.step()) + 3;
  CommandResult r = testing::run_command(train(" --config " + dir(name) +
                                               "/config.toml --resume auto --train.max_steps " +
                                               std::to_string(end)) +
                                         " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = testing::run_command(train(flags("whole", end)) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> a = testing::run_losses(dir(name)),
                            b = testing::run_losses(dir("whole"));
  ASSERT_EQ(a.size(), static_cast<size_t>(end)) << "metrics.jsonl reads as one run";
  ASSERT_EQ(b.size(), a.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)), 0);
  const auto ta = testing::run_tensors(dir(name)), tb = testing::run_tensors(dir("whole"));
  ASSERT_EQ(ta.size(), tb.size());
  for (const auto& [key, ref] : tb) EXPECT_TRUE(ta.at(key) == ref) << key << " differs";
}

// A rank that stops in a phase other than a step (LEDGERLM_TEST_STOP_IN, test_stop_hook.h): the
// phase's name in the census's words, and the flags that make the phase come at step 2.
struct StopCase {
  const char* phase;  // the hook's name for it
  const char* flags;
  const char* where;  // CommWatch::where()
};

void PrintTo(const StopCase& c, std::ostream* os) {
  *os << c.phase;
}

class DistWatchdogPhase : public DistWatchdog, public ::testing::WithParamInterface<StopCase> {};

// Rank 1 stops itself as it enters the phase (world 2, dist.timeout_s 3): the job ends within
// the bound with one line naming rank 1 and the phase, leaves no process, and, once the run
// exists, rank 0 records the failure in summary.json; a start-up that fails leaves no run.
TEST_P(DistWatchdogPhase, RankStoppedInThePhaseIsNamedAndNothingIsLeft) {
  LEDGERLM_REQUIRE_MPI();
  const StopCase& c = GetParam();
  const std::string name = std::string("stopped_in_") + c.phase;
  testing::Background job =
      testing::start_background(train(flags(name, 6) + c.flags + " --dist.timeout_s 3",
                                      std::string("LEDGERLM_TEST_STOP_IN=1:") + c.phase),
                                out_ + "/bg_" + name);
  ASSERT_GT(job.pid, 0);
  // The bound counts from the moment rank 1 is seen stopped (state T).
  bool stopped = false;
  for (int i = 0; i < 600 && !stopped && job.wait(0.1) == -1; ++i)
    for (const JobProcess& p : job_processes(marker(name)))
      if (p.rank == 1 && p.state == 'T') stopped = true;
  const auto t0 = Clock::now();
  const int rc = job.wait(60);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (rc == -1) kill_job(name);
  ASSERT_TRUE(stopped) << "rank 1 was never seen stopped:\n" << job.log();
  ASSERT_NE(rc, -1) << "the job still ran 60 s after rank 1 stopped:\n" << job.log();
  std::printf("%s: job ended %.1f s after rank 1 stopped (dist.timeout_s 3)\n", c.phase, seconds);
  EXPECT_NE(rc, 0);
  const std::string log = job.log();
  const std::string line = timeout_line(log);
  ASSERT_FALSE(line.empty());
  const double limit = stated_limit(line, c.where);
  EXPECT_LT(seconds, limit + kBoundSlackSeconds);
  expect_nothing_left(name);  // the stopped rank included
  if (std::string(c.phase) == "config" || std::string(c.phase) == "startup") {
    EXPECT_FALSE(fs::exists(dir(name))) << "a start-up that failed leaves no run directory";
    return;
  }
  const nlohmann::json summary = read_summary(dir(name));
  ASSERT_TRUE(summary.is_object()) << "no summary.json:\n" << log;
  EXPECT_EQ(summary.value("status", ""), "failed");
  EXPECT_EQ("ledgerlm: error: " + summary.value("failed", ""), line);
  EXPECT_EQ(summary.value("steps", -1), 2) << "the last step that completed";
  // The checkpoint of step 2 never began to be written (its first act is the ranks' agreement).
  EXPECT_TRUE(!fs::exists(dir(name) + "/ckpt") || fs::is_empty(dir(name) + "/ckpt"));
}

INSTANTIATE_TEST_SUITE_P(
    Phases, DistWatchdogPhase,
    ::testing::Values(StopCase{"config", "", "start-up"}, StopCase{"startup", "", "start-up"},
                      StopCase{"evaluation", " --train.eval_interval 2", "evaluation at step 2"},
                      StopCase{"weights", " --train.save_interval 2", "weights save at step 2"},
                      StopCase{"checkpoint", "", "checkpoint save at step 2"}),  // ckpt.interval 2
    [](const ::testing::TestParamInfo<StopCase>& info) { return std::string(info.param.phase); });

TEST_F(DistWatchdog, RankWaitingForASlowRankSleepsAndTheRunFinishes) {
  LEDGERLM_REQUIRE_MPI();
  const std::string name = "slow";
  testing::Background job = testing::start_background(
      train(flags(name, 5) + " --dist.timeout_s 30", "LEDGERLM_TEST_PAUSE_AT=1:3:3"),
      out_ + "/bg_" + name);
  ASSERT_GT(job.pid, 0);
  // Rank 0 logs step 2, then waits at step 3's first collective while rank 1 sleeps 3 s.
  ASSERT_TRUE(testing::wait_for_step(dir(name), 2, 60)) << job.log();
  int waiter = -1;
  for (const JobProcess& p : job_processes(marker(name)))
    if (p.rank == 0) waiter = p.pid;
  ASSERT_GT(waiter, 0) << job.log();
  const double cpu0 = cpu_seconds(waiter);
  const auto t0 = Clock::now();
  testing::run_command("sleep 1.2");
  const double share =
      (cpu_seconds(waiter) - cpu0) / std::chrono::duration<double>(Clock::now() - t0).count();
  const int rc = job.wait(60);
  if (rc == -1) kill_job(name);
  ASSERT_EQ(rc, 0) << job.log();
  std::printf("rank 0 used %.1f%% of a core while it waited for rank 1\n", 100.0 * share);
  // A spinning waiter takes a whole core (two cores, rank 1 asleep); a sleeping one ~1-3%.
  EXPECT_LT(share, 0.5);
  const std::string log = job.log();
  EXPECT_NE(log.find("collectives time out after max(dist.timeout_s = 30 s, 5 x the slowest "
                     "step, evaluation or save so far)"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("ledgerlm: warning"), std::string::npos) << "3 s is within 30 s: " << log;
  EXPECT_EQ(read_summary(dir(name)).value("status", ""), "finished");
}

TEST_F(DistWatchdog, ErrorOnRankOneAloneIsOneLineAndRankZeroRecordsIt) {
  LEDGERLM_REQUIRE_MPI();
  const std::string name = "fails";
  const CommandResult r =
      testing::run_command(train(flags(name, 6), "LEDGERLM_TEST_FAIL_AT=1:3") + " 2>&1");
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_EQ(count(r.output, "ledgerlm: error:"), 1) << r.output;
  const std::string want =
      "rank 1: test failure at step 3 (LEDGERLM_TEST_FAIL_AT) (ending every rank of the job)";
  EXPECT_NE(r.output.find("ledgerlm: error: " + want + "\n"), std::string::npos) << r.output;
  const nlohmann::json summary = read_summary(dir(name));
  ASSERT_TRUE(summary.is_object()) << "no summary.json:\n" << r.output;
  EXPECT_EQ(summary.value("status", ""), "failed");
  EXPECT_EQ(summary.value("failed", ""), want);
  EXPECT_EQ(summary.value("steps", -1), 2) << "the last step that completed";
}

TEST_F(DistWatchdog, TimeoutMustBePositive) {
  LEDGERLM_REQUIRE_MPI();
  const CommandResult r =
      testing::run_command(testing::ledgerlm_binary() + " train" + flags("zero_timeout", 2) +
                           " --dist.timeout_s 0 2>&1");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("ledgerlm: error: dist.timeout_s: expected seconds > 0 (got 0)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(dir("zero_timeout")));
}

// dist.comm with two ranks on the CPU: nccl is refused once, by rank 0, for every rank (the
// refusal is agreed), before the run exists; auto runs on MPI and the summary records it.
TEST_F(DistWatchdog, CommChoiceIsAgreedAndRecorded) {
  LEDGERLM_REQUIRE_MPI();
  CommandResult r = testing::run_command(
      train(flags("nccl_cpu", 2) + " --train.device cpu --dist.comm nccl 2>&1"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  const std::string line =
      "ledgerlm: error: rank 0: dist.comm = nccl needs train.device = cuda (the device is cpu; "
      "NCCL moves GPU memory only: use dist.comm = auto or mpi)\n";
  const size_t at = r.output.find(line);
  EXPECT_NE(at, std::string::npos) << r.output;
  if (at != std::string::npos) {
    EXPECT_EQ(r.output.find("dist.comm = nccl", at + line.size()), std::string::npos)
        << "one line for the job: " << r.output;
  }
  EXPECT_FALSE(fs::exists(dir("nccl_cpu")));

  r = testing::run_command(train(flags("comm_auto", 2) + " --train.device cpu 2>&1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("comm: mpi (dist.comm = auto)\n"), std::string::npos) << r.output;
  const nlohmann::json summary =
      nlohmann::json::parse(testing::read_file(dir("comm_auto") + "/summary.json"));
  EXPECT_EQ(summary["comm"], "mpi");
}

}  // namespace
}  // namespace ledgerlm
