// Bit-exact resume through the ledgerlm binary, on a tiny model (L2 H2 C32 T32 B4) and a corpus
// the test prepares itself (bytes tokenizer): for every optimizer and precision setting, a run
// of 12 steps that saves a checkpoint at step 6 is continued from that checkpoint in a new
// process, and steps 7..12 must give the same losses (compared as bit patterns of the doubles;
// the JSON log prints them with round-trip precision) and byte-identical final weights and
// optimizer state. Tolerance: zero — the same thread count runs the same operations in the same
// order on the same data, so anything but equality is a resume bug.
// Also: stop via the STOP file and SIGTERM (exit 0, checkpoint, resume hint) and `--resume auto`
// continuing the same run directory and metrics.jsonl with a changed step budget.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "ckpt/safetensors.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

// A deterministic pseudo-English corpus (~40 KB), prepared once per process.
const testing::ResumeCorpus kCorpus{
    "resume_data_", [] { return testing::lcg_words(testing::kPseudoEnglish, 12345, 8000, 13); }};

std::string base_flags(const std::string& out, const std::string& name) {
  return kCorpus.flags(out, name) + " --optim.warmup_steps 3";
}

testing::CommandResult train(const std::string& flags) {
  return run_command(testing::ledgerlm_binary() + " train" + flags);
}

// step -> bit pattern of the loss, from the "loss" records of metrics.jsonl.
std::map<int64_t, uint64_t> losses(const std::string& run_dir) {
  std::map<int64_t, uint64_t> out;
  std::istringstream in(testing::read_file(run_dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto rec = nlohmann::json::parse(line);
    if (!rec.contains("loss")) continue;
    const double loss = rec["loss"].get<double>();
    uint64_t bits;
    std::memcpy(&bits, &loss, 8);
    EXPECT_EQ(out.count(rec["step"].get<int64_t>()), 0u) << "step logged twice in " << run_dir;
    out[rec["step"].get<int64_t>()] = bits;
  }
  return out;
}

size_t losses_count(const std::string& run_dir) {
  std::istringstream in(testing::read_file(run_dir + "/metrics.jsonl"));
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) n += line.find("\"loss\"") != std::string::npos;
  return n;
}

void expect_same_losses(const std::string& ref_dir, const std::string& got_dir, int64_t from,
                        int64_t to) {
  auto ref = losses(ref_dir), got = losses(got_dir);
  for (int64_t s = from; s <= to; ++s) {
    ASSERT_TRUE(ref.count(s) && got.count(s)) << "step " << s << " missing";
    EXPECT_EQ(ref[s], got[s]) << "loss at step " << s << " differs";
  }
}

void expect_same_file(const std::string& a, const std::string& b) {
  const std::string x = testing::read_file(a), y = testing::read_file(b);
  ASSERT_FALSE(x.empty()) << a;
  EXPECT_TRUE(x == y) << a << " and " << b << " differ";
}

// The "subnormals" of the run's first record (the CPU threads' mode as the run started).
std::string recorded_subnormals(const std::string& run_dir) {
  std::istringstream in(testing::read_file(run_dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto rec = nlohmann::json::parse(line);
    if (rec.contains("build")) return rec.value("subnormals", "(none)");
  }
  return "(no first record)";
}

struct ResumeCase {
  const char* name;
  const char* flags;
};

class ResumeBitExact : public ::testing::TestWithParam<ResumeCase> {};

TEST_P(ResumeBitExact, SixPlusSixEqualsTwelve) {
  const ResumeCase& c = GetParam();
  const std::string out = testing::make_temp_dir("resume_runs_");
  // Reference: 12 uninterrupted steps; saving a checkpoint only reads the state.
  auto full = train(base_flags(out, "full") + " --train.max_steps 12 --ckpt.interval 6" + c.flags);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  ASSERT_TRUE(fs::exists(out + "/full/ckpt/step_000006/meta.json")) << full.output;
  // A new process continues from the step-6 checkpoint into another run directory.
  auto resumed = train(base_flags(out, "resumed") + " --train.max_steps 12 --resume " + out +
                       "/full/ckpt/step_000006" + c.flags);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from"), std::string::npos) << resumed.output;
  expect_same_losses(out + "/full", out + "/resumed", 7, 12);
  expect_same_file(out + "/full/model.safetensors", out + "/resumed/model.safetensors");
  expect_same_file(out + "/full/ckpt/step_000012/optimizer.safetensors",
                   out + "/resumed/ckpt/step_000012/optimizer.safetensors");
  // precision.subnormals is what both processes' compute threads did (read back from them).
  const std::string subnormals =
      std::string(c.flags).find("--precision.subnormals keep") != std::string::npos ? "keep"
                                                                                    : "flush";
  EXPECT_EQ(recorded_subnormals(out + "/full"), subnormals);
  EXPECT_EQ(recorded_subnormals(out + "/resumed"), subnormals);
  // With precision.state = bf16 the checkpoint stores the state in its own dtype (2 bytes per
  // element), never widened to fp32.
  if (std::string(c.flags).find("--precision.state bf16") != std::string::npos) {
    const SafeTensorsFile f =
        SafeTensorsFile::open(out + "/resumed/ckpt/step_000012/optimizer.safetensors");
    int bf16 = 0;
    for (const SafeTensorInfo& t : f.tensors()) {
      EXPECT_EQ(t.dtype, DType::kBF16) << t.name;
      bf16 += t.dtype == DType::kBF16;
    }
    EXPECT_GT(bf16, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    AllOptimizersAndPrecisions, ResumeBitExact,
    ::testing::Values(
        ResumeCase{"adamw_fp32_dropout_accum",
                   " --optim.name adamw --model.dropout 0.1 --train.accum 2"},
        ResumeCase{"sgd_momentum", " --optim.name sgd --optim.momentum 0.9 --optim.lr 0.05"},
        ResumeCase{"lamb", " --optim.name lamb"},
        ResumeCase{"lars", " --optim.name lars --optim.lr 0.05"},
        ResumeCase{"adafactor", " --optim.name adafactor --optim.adafactor_beta1 0.9"},
        ResumeCase{"adamw8bit", " --optim.name adamw8bit"},
        ResumeCase{"lion", " --optim.name lion --optim.lr 1e-4 --optim.weight_decay 1"},
        // The other precision.subnormals setting (IEEE subnormals kept on every thread) keeps
        // the bitwise contract too, and the resumed process keeps it.
        ResumeCase{"lion_subnormals_keep",
                   " --optim.name lion --optim.lr 1e-4 --optim.weight_decay 1"
                   " --precision.subnormals keep"},
        // x in the master, y in the compute copy (its "compute" file), z, v and the scalars.
        ResumeCase{"schedulefree", " --optim.name adamw_schedulefree --optim.schedule constant"},
        ResumeCase{"schedulefree_bf16",
                   " --optim.name adamw_schedulefree --optim.schedule "
                   "constant --precision.params bf16"},
        // The average of the weights and its count of steps (optim.ema_half_life) travel as
        // optimizer state; the weights file is the average.
        ResumeCase{"adamw_ema", " --optim.name adamw --optim.ema_half_life 2048"},
        // The alpha/beta3 warmup (the run's 12 steps) travels in the checkpoint.
        ResumeCase{"ademamix", " --optim.name ademamix"},
        ResumeCase{"muon", " --optim.name muon --optim.lr 0.02"},
        ResumeCase{"muon_bf16_state",
                   " --optim.name muon --optim.lr 0.02 --precision.params bf16 --precision.state "
                   "bf16"},
        ResumeCase{"adamw_bf16_master_fp32", " --optim.name adamw --precision.params bf16"},
        // Frozen tensors are rebuilt from the seed's init and checked by hash; adapters with
        // dropout on their input, over a bf16 base with fp32 masters for the factors.
        ResumeCase{"freeze", " --optim.name adamw --train.freeze embed.*,block.0.*"},
        ResumeCase{"lora_bf16_dropout",
                   " --optim.name adamw --optim.lr 1e-2 --lora.rank 4 --lora.dropout 0.1"
                   " --lora.targets qkv,attn_proj,mlp_fc,mlp_proj --precision.params bf16"},
        // The master and the state in files (optim.offload = disk, a 64 KiB arena): the
        // checkpoint streams them from disk, the resume writes them back there.
        ResumeCase{"offload_disk_bf16",
                   " --optim.name adamw --precision.params bf16 --optim.offload disk"
                   " --optim.offload_staging_mb 0.0625"},
        ResumeCase{"offload_disk_lamb",
                   " --optim.name lamb --optim.offload disk --optim.offload_staging_mb 0.0625"},
        ResumeCase{"adamw_bf16_matmul_bf16",
                   " --optim.name adamw --precision.params bf16 --precision.matmul bf16"},
        // m and v stored as bf16: the checkpoint holds their exact bits (BF16 tensors).
        ResumeCase{"adamw_bf16_state", " --optim.name adamw --precision.state bf16"},
        // Large initial scale and a short growth interval: the scaler backs off and grows
        // within the run, so its state must travel in the checkpoint.
        ResumeCase{"adamw_fp16_dynamic_scaling",
                   " --optim.name adamw --precision.params fp16 --precision.grads fp16"
                   " --precision.init_scale 131072 --precision.growth_interval 3"},
        ResumeCase{"adamw_bf16_master_none_stochastic",
                   " --optim.name adamw --precision.params bf16 --precision.master none"
                   " --precision.rounding stochastic"}),
    [](const ::testing::TestParamInfo<ResumeCase>& info) { return std::string(info.param.name); });

// --resume auto on a run that already spent its budget (a sweep rerun) trains nothing and leaves
// the run's files alone; it used to rewrite summary.json with "final_loss": null.
TEST(ResumeAuto, FinishedRunIsLeftAsItIs) {
  const std::string out = testing::make_temp_dir("resume_finished_");
  auto first = train(base_flags(out, "run") + " --train.max_steps 4 --optim.name adamw");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string summary = testing::read_file(out + "/run/summary.json");
  const std::string metrics = testing::read_file(out + "/run/metrics.jsonl");
  ASSERT_NE(summary.find("\"final_loss\": "), std::string::npos);
  auto again = run_command(testing::ledgerlm_binary() + " train --config " + out +
                           "/run/config.toml --resume auto 2>&1");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("its budget is spent: nothing to do"), std::string::npos)
      << again.output;
  EXPECT_EQ(testing::read_file(out + "/run/summary.json"), summary);
  EXPECT_EQ(testing::read_file(out + "/run/metrics.jsonl"), metrics);
}

// A run killed after its final checkpoint was committed but before its weights and summary were
// written (SIGKILL at the final save's prune stage: step 4 is the 2nd save) is completed by
// --resume auto: no step is trained, and model.safetensors and summary.json are written as an
// uninterrupted run writes them (weights byte for byte; status, steps, tokens and the final
// losses equal). It used to say "nothing to do" and leave the run without weights forever.
TEST(ResumeAuto, KilledAfterFinalCheckpointIsCompleted) {
  const std::string out = testing::make_temp_dir("resume_final_kill_");
  const std::string flags = " --train.max_steps 4 --ckpt.interval 2 --optim.name adamw";
  auto ref = train(base_flags(out, "ref") + flags);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  auto killed = run_command("LEDGERLM_TEST_CKPT_KILL=prune@2 exec " + testing::ledgerlm_binary() +
                            " train" + base_flags(out, "run") + flags);
  ASSERT_TRUE(killed.exit_code == 137 || killed.exit_code == -1) << killed.output;
  ASSERT_TRUE(fs::exists(out + "/run/ckpt/" + checkpoint_dir_name(4) + "/meta.json"));
  ASSERT_FALSE(fs::exists(out + "/run/model.safetensors"));
  ASSERT_FALSE(fs::exists(out + "/run/summary.json"));
  const std::string resume =
      testing::ledgerlm_binary() + " train --config " + out + "/run/config.toml --resume auto 2>&1";
  auto again = run_command(resume);
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(again.output.find("nothing to do"), std::string::npos) << again.output;
  EXPECT_EQ(again.output.find("step 5"), std::string::npos) << "trained a step: " << again.output;
  expect_same_file(out + "/ref/model.safetensors", out + "/run/model.safetensors");
  const auto want = nlohmann::json::parse(testing::read_file(out + "/ref/summary.json"));
  const auto got = nlohmann::json::parse(testing::read_file(out + "/run/summary.json"));
  for (const char* key :
       {"status", "steps", "tokens", "final_loss", "final_val_loss", "final_val_bpb",
        "best_val_loss", "best_val_bpb", "skipped_steps", "params", "ckpt", "weights_bytes"})
    EXPECT_EQ(got[key], want[key]) << key;
  EXPECT_EQ(got["status"], "finished");
  EXPECT_TRUE(got["final_loss"].is_number());
  // The log ends with the summary, and each step is logged once.
  expect_same_losses(out + "/ref", out + "/run", 1, 4);
  std::istringstream log(testing::read_file(out + "/run/metrics.jsonl"));
  std::string line, last;
  while (std::getline(log, line)) last = line;
  EXPECT_EQ(nlohmann::json::parse(last).value("status", ""), "finished") << last;
  // Now it is finished: a further --resume auto has nothing to do and changes nothing.
  const std::string summary = testing::read_file(out + "/run/summary.json");
  auto third = run_command(resume);
  ASSERT_EQ(third.exit_code, 0) << third.output;
  EXPECT_NE(third.output.find("its budget is spent: nothing to do"), std::string::npos)
      << third.output;
  EXPECT_EQ(testing::read_file(out + "/run/summary.json"), summary);
}

// --resume auto continues the same run directory and metrics.jsonl; a changed step budget is
// allowed and logged. The constant schedule makes the LR independent of the budget, so 6 steps
// then 6 more must equal 12 in one go.
TEST(ResumeAuto, SameRunDirectoryWithChangedBudget) {
  const std::string out = testing::make_temp_dir("resume_auto_");
  const std::string flags = " --optim.schedule constant --optim.name adamw --precision.params bf16";
  auto ref = train(base_flags(out, "ref") + " --train.max_steps 12" + flags);
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  auto first = train(base_flags(out, "run") + " --train.max_steps 6" + flags);
  ASSERT_EQ(first.exit_code, 0) << first.output;
  // Resume from the run's own resolved config, changing only the budget.
  auto second = run_command(testing::ledgerlm_binary() + " train --config " + out +
                            "/run/config.toml --train.max_steps 12 --resume auto");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("train.max_steps changed from 6 to 12"), std::string::npos)
      << second.output;
  expect_same_losses(out + "/ref", out + "/run", 1, 12);
  expect_same_file(out + "/ref/model.safetensors", out + "/run/model.safetensors");
  const std::string log = testing::read_file(out + "/run/metrics.jsonl");
  EXPECT_NE(log.find("\"ckpt_save_s\""), std::string::npos);
  EXPECT_NE(log.find("\"ckpt_load_s\""), std::string::npos);
  EXPECT_NE(log.find("\"ckpt_bytes\""), std::string::npos);
  // The tensor bytes saved agree exactly with the memory ledger's prediction of a full
  // checkpoint (weights in the compute dtype + fp32 master + every optimizer state).
  auto ledger = nlohmann::json::parse(testing::read_file(out + "/run/ledger.json"));
  std::istringstream in(log);
  std::string line;
  int saves = 0;
  while (std::getline(in, line)) {
    auto rec = nlohmann::json::parse(line);
    if (!rec.contains("ckpt_data_bytes")) continue;
    ++saves;
    EXPECT_EQ(rec["ckpt_data_bytes"], ledger["checkpoint"]["predicted_full_state_bytes"]);
  }
  EXPECT_EQ(saves, 2);
}

// A STOP file present at the start stops the run after its first step (it is checked after
// every step): exit 75 (stopped, resumable: not 0, which says finished), a checkpoint, the STOP
// file removed and the resume command printed;
// running that command finishes the run exactly like an uninterrupted one.
TEST(ResumeStop, StopFileThenResumeAuto) {
  const std::string out = testing::make_temp_dir("resume_stop_");
  auto ref = train(base_flags(out, "ref") + " --train.max_steps 10");
  ASSERT_EQ(ref.exit_code, 0) << ref.output;
  fs::create_directories(out + "/run");
  ASSERT_TRUE(testing::write_file(out + "/run/STOP", ""));
  auto stopped = train(base_flags(out, "run") + " --train.max_steps 10 --train.overwrite true");
  ASSERT_EQ(stopped.exit_code, 75) << stopped.output;
  const std::string hint =
      "resume with: ledgerlm train --config " + out + "/run/config.toml --resume auto";
  EXPECT_NE(stopped.output.find(hint), std::string::npos) << stopped.output;
  EXPECT_FALSE(fs::exists(out + "/run/STOP"));
  ASSERT_TRUE(fs::exists(out + "/run/ckpt/step_000001/meta.json")) << stopped.output;
  auto resumed = run_command(testing::ledgerlm_binary() + " train --config " + out +
                             "/run/config.toml --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  expect_same_losses(out + "/ref", out + "/run", 1, 10);
  expect_same_file(out + "/ref/model.safetensors", out + "/run/model.safetensors");
}

// SIGTERM (and SIGUSR1, what mpirun forwards) mid-run: the step finishes, a checkpoint is saved,
// exit 75 (stopped, resumable); the checkpoint resumes.
void stop_by_signal(int sig) {
  const std::string out = testing::make_temp_dir("resume_sig_");
  const std::string log = out + "/train.log";
  const std::string cmd = "exec " + testing::ledgerlm_binary() + " train" + base_flags(out, "run") +
                          " --train.max_steps 1000000 > " + log + " 2>&1";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until training is under way (a few loss records), then signal.
  const auto t0 = std::chrono::steady_clock::now();
  while (losses_count(out + "/run") < 3 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(kill(pid, sig), 0);
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 1000 && !exited; ++i) {  // up to 20 s
    exited = waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "ledgerlm did not stop after the signal: " << testing::read_file(log);
  }
  const std::string output = testing::read_file(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 75) << output;
  EXPECT_NE(output.find("stopped by signal"), std::string::npos) << output;
  EXPECT_NE(output.find("--resume auto"), std::string::npos) << output;
  const int64_t stopped_at = losses(out + "/run").rbegin()->first;
  ASSERT_EQ(checkpoint_latest(out + "/run/ckpt"),
            out + "/run/ckpt/" + checkpoint_dir_name(stopped_at))
      << output;
  auto resumed = run_command(testing::ledgerlm_binary() + " train --config " + out +
                             "/run/config.toml --resume auto --train.max_steps " +
                             std::to_string(stopped_at + 2));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  auto l = losses(out + "/run");
  EXPECT_EQ(l.rbegin()->first, stopped_at + 2);
  EXPECT_EQ(static_cast<int64_t>(l.size()), stopped_at + 2);  // no step lost or repeated
}

TEST(ResumeStop, Sigterm) {
  stop_by_signal(SIGTERM);
}
TEST(ResumeStop, Sigusr1) {
  stop_by_signal(SIGUSR1);
}

// A resume that changes the global batch (world x micro-batch x accum) says so in one line, also
// when no single key says it (the world size is no config key: tests/dist/test_dist_resume.cpp);
// one that keeps it (micro-batch halved, accumulation doubled) prints no such line.
TEST(ResumeAuto, ChangedGlobalBatchIsNamed) {
  const std::string out = testing::make_temp_dir("resume_batch_");
  ASSERT_EQ(train(base_flags(out, "run") + " --train.max_steps 2").exit_code, 0);
  const std::string resume =
      testing::ledgerlm_binary() + " train --config " + out + "/run/config.toml --resume auto";
  auto r = run_command(resume + " --train.max_steps 3 --train.micro_batch 2 --train.accum 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("global batch changed"), std::string::npos) << r.output;
  r = run_command(resume + " --train.max_steps 4 --train.micro_batch 8 --train.accum 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("resume: global batch changed from 4 to 8 sequences (world 1->1, "
                          "micro-batch 2->8, accum 2->1)\n"),
            std::string::npos)
      << r.output;
}

}  // namespace
}  // namespace ledgerlm
