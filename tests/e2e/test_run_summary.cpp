// A run's summary.json and `ledgerlm compare`:
//   - a finished run's summary.json is exactly the record that ends its metrics.jsonl, and its
//     figures (losses, mean optimizer-step ms) agree with the log, the files on disk and an
//     independent SHA-256 (sha256sum);
//   - a stopped run (STOP file) writes one too, and a resumed run's log keeps one summary only;
//   - compare prints the summaries side by side and exactly the config keys that differ;
//   - compare's errors are one line;
//   - a run that fails (diverged, fp16's consecutive-skip limit) writes one saying "failed" and
//     why (before, it left none and compare said "running, or killed"), and resumes;
//   - provenance: `ledgerlm --version` names the commit the binary was built from (and whether it
//     had uncommitted changes), every run records the same in summary.json and in the first
//     metrics.jsonl record, and cmake/build_info.cmake writes "unknown" outside git, marks an
//     edited checkout dirty and leaves its file untouched when nothing changed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/run_files_test_support.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::CommandResult;
using testing::read_file;
using testing::run_command;
using testing::RunFilesTest;
using testing::write_file;

int64_t files_bytes(const std::string& dir) {
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) n += static_cast<int64_t>(e.file_size());
  return n;
}

int count_summaries(const std::vector<json>& log) {
  return static_cast<int>(
      std::count_if(log.begin(), log.end(), [](const json& r) { return r.contains("summary"); }));
}

class SummaryTest : public RunFilesTest {};

TEST_F(SummaryTest, FinishedRunSummaryIsTheLogsLastRecord) {
  const CommandResult r = train("fin", "--train.max_steps 12");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<json> log = metrics("fin");
  const json s = summary_json("fin");
  EXPECT_EQ(s, log.back()) << "summary.json and the log's last line are one record";
  EXPECT_EQ(count_summaries(log), 1);
  EXPECT_EQ(s["status"], "finished");
  EXPECT_EQ(s["steps"], 12);
  EXPECT_EQ(s["tokens"], 12 * 8 * 32);
  EXPECT_EQ(s["global_batch"], 8);
  EXPECT_EQ(s["world"], 1);
  EXPECT_EQ(s["comm"], "single") << "the Comm the run resolved (dist.comm = auto, one rank)";

  // Losses: the last step's, the last and the best evaluation (steps 4, 8, 12).
  double last_loss = NAN, last_val = NAN, best_val = INFINITY, optim_ms = 0.0;
  for (const json& rec : log) {
    if (rec.contains("loss")) last_loss = rec["loss"].get<double>();
    if (rec.contains("loss")) optim_ms += rec["optim_ms"].get<double>() / 12;
    if (rec.contains("val_loss") && !rec.contains("summary")) {
      last_val = rec["val_loss"].get<double>();
      best_val = std::min(best_val, last_val);
    }
  }
  EXPECT_EQ(s["final_loss"].get<double>(), last_loss);
  EXPECT_EQ(s["final_val_loss"].get<double>(), last_val);
  EXPECT_EQ(s["best_val_loss"].get<double>(), best_val);
  EXPECT_DOUBLE_EQ(s["mean_tokens_per_s"].get<double>(),
                   s["tokens"].get<double>() / s["train_s"].get<double>());
  EXPECT_NEAR(s["mean_optim_ms"].get<double>(), optim_ms, 1e-9 * optim_ms);
  EXPECT_GT(optim_ms, 0.0);

  // What the run produced: the hash of config.toml (computed here by coreutils), the final
  // checkpoint's size on disk, the weights file's size.
  const CommandResult sha = run_command("sha256sum " + run_dir("fin") + "/config.toml");
  ASSERT_EQ(sha.exit_code, 0) << sha.output;
  EXPECT_EQ(s["config_sha256"], sha.output.substr(0, 64));
  EXPECT_EQ(s["ckpt"], "step_000012");
  EXPECT_EQ(s["ckpt_bytes"], files_bytes(run_dir("fin") + "/ckpt/step_000012"));
  EXPECT_GT(s["ckpt_bytes"].get<int64_t>(), s["weights_bytes"].get<int64_t>());
  EXPECT_EQ(s["weights_bytes"],
            static_cast<int64_t>(fs::file_size(run_dir("fin") + "/model.safetensors")));
  EXPECT_GT(s["mem"]["total"]["peak"].get<int64_t>(), 0);
}

// A STOP file present at a resume stops after the first step: that job's summary says so; the
// next resume drops it from the log and ends the log with its own.
// dist.comm = nccl needs the cuda device: on the CPU one line says so, before the run exists.
TEST_F(SummaryTest, NcclCommOnTheCpuIsRefusedInOneLine) {
  const CommandResult r =
      train("nccl_cpu", "--train.max_steps 2 --train.device cpu --dist.comm nccl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("ledgerlm: error: dist.comm = nccl needs train.device = cuda (the "
                          "device is cpu; NCCL moves GPU memory only: use dist.comm = auto or "
                          "mpi)\n"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(run_dir("nccl_cpu"))) << "a refused start leaves nothing";
}

TEST_F(SummaryTest, StoppedRunSummaryAndOneSummaryPerLog) {
  ASSERT_EQ(train("stop", "--train.max_steps 4").exit_code, 0);
  ASSERT_TRUE(write_file(run_dir("stop") + "/STOP", ""));
  CommandResult r = train("stop", "--train.max_steps 10 --resume auto");
  ASSERT_EQ(r.exit_code, 75) << r.output;  // stopped, resumable
  json s = summary_json("stop");
  std::vector<json> log = metrics("stop");
  EXPECT_EQ(s, log.back());
  EXPECT_EQ(s["status"], "stopped");
  EXPECT_NE(s["stopped"].get<std::string>().find("STOP file"), std::string::npos) << s["stopped"];
  EXPECT_EQ(s["steps"], 5);
  EXPECT_EQ(s["ckpt"], "step_000005");
  EXPECT_EQ(s["ckpt_bytes"], files_bytes(run_dir("stop") + "/ckpt/step_000005"));
  EXPECT_EQ(count_summaries(log), 1) << "the first job's summary is dropped on resume";

  r = train("stop", "--train.max_steps 10 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  s = summary_json("stop");
  log = metrics("stop");
  EXPECT_EQ(s, log.back());
  EXPECT_EQ(s["status"], "finished");
  EXPECT_EQ(s["steps"], 10);
  EXPECT_EQ(count_summaries(log), 1);
}

TEST_F(SummaryTest, CompareShowsSummariesAndTheKeysThatDiffer) {
  ASSERT_EQ(train("cmp_a", "--train.max_steps 8").exit_code, 0);
  ASSERT_EQ(train("cmp_b", "--train.max_steps 8 --optim.lr 1e-3 --train.seed 7").exit_code, 0);
  ASSERT_EQ(train("cmp_c", "--train.max_steps 8").exit_code, 0);
  const std::string a = run_dir("cmp_a"), b = run_dir("cmp_b"), c = run_dir("cmp_c");

  CommandResult r = run_command(bin() + " compare --json " + a + " " + b);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json j = json::parse(r.output);
  const json want = {{"optim.lr", {"0.003", "0.001"}}, {"train.seed", {"1337", "7"}}};
  EXPECT_EQ(j["config_differs"], want);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["summary"], summary_json("cmp_a"));
  EXPECT_EQ(j["runs"][1]["summary"], summary_json("cmp_b"));
  EXPECT_EQ(j["runs"][1]["label"], "cmp_b");

  // The text form: both runs' final val losses (4 decimals) and the two keys with their values.
  r = run_command(bin() + " compare " + a + " " + b);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* name : {"cmp_a", "cmp_b"}) {
    char val[32];
    std::snprintf(val, sizeof val, "%.4f", summary_json(name)["final_val_loss"].get<double>());
    EXPECT_NE(r.output.find(val), std::string::npos) << val << "\n" << r.output;
  }
  EXPECT_NE(r.output.find("2 key(s) differ"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("optim.lr"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("train.seed"), std::string::npos) << r.output;

  // Same config (only the name differs), and a run without summary.json.
  fs::remove(c + "/summary.json");
  r = run_command(bin() + " compare " + a + " " + c);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no key differs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("no summary.json"), std::string::npos) << r.output;
}

// The output's one error line.
std::string error_line(const CommandResult& r) {
  const size_t at = r.output.find("ledgerlm: error: ");
  if (at == std::string::npos) return "";
  EXPECT_EQ(r.output.find("ledgerlm: error: ", at + 1), std::string::npos) << r.output;
  return r.output.substr(at + 17, r.output.find('\n', at) - at - 17);
}

// A resumed job diverges (LR 1e30: step 5's update makes the weights non-finite, step 6's loss is
// NaN): non-zero exit, one error line, and the summary says "failed" with that line; compare
// shows it. The checkpoint of step 4 stays, and a resume with a sane LR finishes.
TEST_F(SummaryTest, DivergedRunSaysFailedAndResumes) {
  ASSERT_EQ(train("div", "--train.max_steps 4").exit_code, 0);
  CommandResult r =
      train("div", "--train.max_steps 20 --optim.lr 1e30 --ckpt.interval 0 --resume auto");
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string error = error_line(r);
  EXPECT_NE(error.find("training diverged"), std::string::npos) << r.output;
  json s = summary_json("div");
  std::vector<json> log = metrics("div");
  EXPECT_EQ(s, log.back()) << "summary.json and the log's last line are one record";
  EXPECT_EQ(s["status"], "failed");
  EXPECT_EQ(s["failed"], error);
  // Steps: the last one whose update completed, the last step the log has a loss for.
  int64_t last_step = 0;
  for (const json& rec : log)
    if (rec.contains("loss")) last_step = rec["step"].get<int64_t>();
  EXPECT_EQ(s["steps"], last_step);
  EXPECT_NE(error.find("at step " + std::to_string(last_step + 1)), std::string::npos) << error;
  EXPECT_EQ(s["ckpt"], "step_000004");

  r = run_command(bin() + " compare " + run_dir("div"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("failed: " + error), std::string::npos) << r.output;

  r = train("div", "--train.max_steps 8 --resume auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  s = summary_json("div");
  log = metrics("div");
  EXPECT_EQ(s["status"], "finished");
  EXPECT_EQ(s["steps"], 8);
  EXPECT_EQ(count_summaries(log), 1) << "the failed job's summary is dropped on resume";
}

// fp16 with a static loss scale of 1e30 overflows every step's gradients: every step is skipped
// and the run stops at precision.max_consecutive_skips (3), after 2 skipped steps completed.
TEST_F(SummaryTest, Fp16SkipLimitSaysFailed) {
  const CommandResult r = train("skips",
                                "--train.max_steps 20 --precision.params fp16 --precision.grads "
                                "fp16 --precision.loss_scale static --precision.init_scale 1e30 "
                                "--precision.max_consecutive_skips 3");
  EXPECT_NE(r.exit_code, 0) << r.output;
  const std::string error = error_line(r);
  EXPECT_NE(error.find("fp16: 3 consecutive steps with non-finite gradients at step 3"),
            std::string::npos)
      << r.output;
  const json s = summary_json("skips");
  EXPECT_EQ(s, metrics("skips").back());
  EXPECT_EQ(s["status"], "failed");
  EXPECT_EQ(s["failed"], error);
  EXPECT_EQ(s["steps"], 2);
  EXPECT_EQ(s["skipped_steps"], 2);
  const CommandResult c = run_command(bin() + " compare --json " + run_dir("skips"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_EQ(json::parse(c.output)["runs"][0]["summary"]["status"], "failed");
}

TEST_F(SummaryTest, CompareErrorsAreOneLine) {
  ASSERT_EQ(train("cmp_err", "--train.max_steps 2").exit_code, 0);
  const std::string err = root_ + "/compare_err.txt";
  auto expect_error = [&](const std::string& args, const std::string& needle) {
    const CommandResult r =
        run_command("{ " + bin() + " compare " + args + " 2>" + err + " >/dev/null; }");
    EXPECT_NE(r.exit_code, 0) << args;
    const std::string text = read_file(err);
    EXPECT_EQ(text.rfind("ledgerlm: error: ", 0), 0u) << text;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
    EXPECT_NE(text.find(needle), std::string::npos) << text;
  };
  expect_error(run_dir("cmp_err") + " " + root_, "no config.toml");
  expect_error("", "runs");  // no run given
  ASSERT_TRUE(write_file(run_dir("cmp_err") + "/summary.json", "{\"steps\": 3"));
  expect_error(run_dir("cmp_err"), "summary.json");
}

// The commit and dirty word of `ledgerlm --version`'s one line, which must have this form.
struct VersionLine {
  std::string commit, state;
};

VersionLine parse_version(const std::string& out) {
  std::smatch m;
  const std::regex form(
      "^ledgerlm [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ([0-9a-f]{40}|unknown)"
      "(, clean|, with uncommitted changes|: built outside a git checkout|, changes "
      "unknown)\\)\n$");
  if (!std::regex_match(out, m, form)) return {};
  return {m[1], m[2]};
}

TEST_F(SummaryTest, VersionNamesTheCommitOfTheSourceTree) {
  const CommandResult v = run_command(bin() + " --version");
  ASSERT_EQ(v.exit_code, 0) << v.output;
  const VersionLine line = parse_version(v.output);
  ASSERT_FALSE(line.commit.empty()) << "not one version line: " << v.output;
  const CommandResult head =
      run_command("git -C " + testing::source_dir() + " rev-parse --verify HEAD 2>/dev/null");
  const std::string want = head.exit_code == 0 ? head.output.substr(0, 40) : "unknown";
  EXPECT_EQ(line.commit, want) << "the checkout the binary was built from";
}

TEST_F(SummaryTest, EveryRunRecordsTheBuildThatTrainedIt) {
  const CommandResult r = train("build", "--train.max_steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const VersionLine line = parse_version(run_command(bin() + " --version").output);
  ASSERT_FALSE(line.commit.empty());
  const json s = summary_json("build");
  ASSERT_TRUE(s.contains("build")) << s.dump();
  EXPECT_EQ(s["build"]["commit"], line.commit);
  const json want_dirty = line.state == ", clean"                      ? json(false)
                          : line.state == ", with uncommitted changes" ? json(true)
                                                                       : json();
  EXPECT_EQ(s["build"]["dirty"], want_dirty) << line.state;
  EXPECT_EQ(metrics("build").front()["build"], s["build"]) << "the log's first record";
}

// The generator itself, on checkouts made here: outside git, a clean commit, an edited tracked
// file (untracked files do not count), and a re-run that changes nothing keeps the file as it
// was (so the build recompiles nothing).
TEST_F(SummaryTest, BuildInfoGeneratorSaysUnknownCleanOrDirty) {
  const std::string dir = testing::make_temp_dir("build_info");
  const std::string out = dir + "/gen.cpp";
  fs::create_directories(dir + "/plain");
  auto generate = [&](const std::string& src) {
    const CommandResult g =
        run_command("cmake -DSRC=" + src + " -DVERSION=9.8.7 -DOUT=" + out + " -P " +
                    testing::source_dir() + "/cmake/build_info.cmake 2>&1");
    EXPECT_EQ(g.exit_code, 0) << g.output;
    return read_file(out);
  };
  std::string text = generate(dir + "/plain");
  EXPECT_NE(text.find("build_commit() { return \"unknown\"; }"), std::string::npos) << text;
  EXPECT_NE(text.find("build_dirty() { return -1; }"), std::string::npos) << text;
  EXPECT_NE(text.find("build_version() { return \"9.8.7\"; }"), std::string::npos) << text;

  const std::string repo = dir + "/repo";
  fs::create_directories(repo);
  write_file(repo + "/a.txt", "one\n");
  const CommandResult init =
      run_command("cd " + repo +
                  " && git init -q && git add a.txt && git -c user.name=t -c user.email=t@t "
                  "commit -q -m one && git rev-parse HEAD");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  const std::string head = init.output.substr(0, 40);
  write_file(repo + "/untracked.txt", "not part of the build\n");
  text = generate(repo);
  EXPECT_NE(text.find("build_commit() { return \"" + head + "\"; }"), std::string::npos) << text;
  EXPECT_NE(text.find("build_dirty() { return 0; }"), std::string::npos) << text;
  const auto written = fs::last_write_time(out);
  fs::last_write_time(out, written - std::chrono::hours(1));
  generate(repo);
  EXPECT_EQ(fs::last_write_time(out), written - std::chrono::hours(1))
      << "unchanged provenance must not rewrite the file (nothing would need recompiling)";

  write_file(repo + "/a.txt", "two\n");
  text = generate(repo);
  EXPECT_NE(text.find("build_dirty() { return 1; }"), std::string::npos) << text;
}

}  // namespace
}  // namespace ledgerlm
