// Resume and --init-from refusals through the ledgerlm binary: a changed architecture or
// optimizer, a corrupted or truncated checkpoint — each one line, non-zero exit, and the run
// directory (metrics.jsonl, earlier checkpoints) left as it was. Also --init-from (weights only)
// from a checkpoint and from a weights file agree bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ckpt/checkpoint.h"
#include "tests/support/resume_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using testing::expect_one_error_line;
using testing::ledgerlm;
using testing::run_command;

const testing::ResumeCorpus kCorpus{"resume_err_data_",
                                    [] { return testing::lcg_letters(99, 30000); }};

class ResumeErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = testing::make_temp_dir("resume_err_");
    run_ = out_ + "/run";
    auto r =
        ledgerlm("train" + kCorpus.flags(out_, "run") + " --train.max_steps 4 --ckpt.interval 2");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    metrics_ = testing::read_file(run_ + "/metrics.jsonl");
  }
  void expect_run_untouched() {
    EXPECT_EQ(testing::read_file(run_ + "/metrics.jsonl"), metrics_);
    EXPECT_EQ(checkpoint_latest(run_ + "/ckpt"), run_ + "/ckpt/step_000004");
    CheckpointReader::open(run_ + "/ckpt/step_000002").verify_all();
  }
  // Resuming with the run's own config still works afterwards (nothing was damaged).
  void expect_resumable(const std::string& from = "auto") {
    auto r =
        ledgerlm("train --config " + run_ + "/config.toml --train.max_steps 6 --resume " + from);
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
  std::string out_, run_, metrics_;
};

TEST_F(ResumeErrors, ArchitectureChangeRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --model.n_layer 3 --resume auto");
  expect_one_error_line(r, {"model.n_layer = 3", "saved with model.n_layer = 2", "architecture"});
  expect_run_untouched();
  expect_resumable();
}

// The MLP's width is architecture: another model.ffn_hidden is refused in one line; the
// default's own width (4 x n_embd = 128) given explicitly is the same model and resumes.
TEST_F(ResumeErrors, FfnHiddenChangeRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --model.ffn_hidden 48 --resume auto");
  expect_one_error_line(
      r, {"model.ffn_hidden = 48", "saved with model.ffn_hidden = 128", "architecture"});
  expect_run_untouched();
  r = ledgerlm("train --config " + run_ +
               "/config.toml --model.ffn_hidden 128 --train.max_steps 6 --resume auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// The MLP variant, the head's tying and its soft-cap are architecture: each refused in one line.
TEST_F(ResumeErrors, MlpVariantUntiedHeadAndSoftcapChangesRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --model.mlp relu2 --resume auto");
  expect_one_error_line(r, {"model.mlp = relu2", "saved with model.mlp = gelu", "architecture"});
  r = ledgerlm("train --config " + run_ +
               "/config.toml --model.tie_embeddings false --resume auto");
  expect_one_error_line(
      r, {"model.tie_embeddings = false", "saved with model.tie_embeddings", "architecture"});
  r = ledgerlm("train --config " + run_ + "/config.toml --model.logit_softcap 15 --resume auto");
  expect_one_error_line(
      r, {"model.logit_softcap = 15", "saved with model.logit_softcap", "architecture"});
  expect_run_untouched();
}

// The attention variants are architecture: rotary positions, fewer kv heads and QK-norm are each
// refused in one line; model.n_kv_head = n_head (2) given explicitly is the same model and
// resumes.
TEST_F(ResumeErrors, AttentionVariantChangeRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --model.position rope --resume auto");
  expect_one_error_line(
      r, {"model.position = rope", "saved with model.position = learned", "architecture"});
  r = ledgerlm("train --config " + run_ + "/config.toml --model.n_kv_head 1 --resume auto");
  expect_one_error_line(r,
                        {"model.n_kv_head = 1", "saved with model.n_kv_head = 2", "architecture"});
  r = ledgerlm("train --config " + run_ + "/config.toml --model.qk_norm true --resume auto");
  expect_one_error_line(r, {"model.qk_norm = true", "architecture"});
  expect_run_untouched();
  r = ledgerlm("train --config " + run_ +
               "/config.toml --model.n_kv_head 2 --train.max_steps 6 --resume auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// model.norm: the norm and the biases are architecture (the checkpoint holds GPT-2's
// LayerNorm and biases): another value is refused in one line naming the key.
TEST_F(ResumeErrors, NormOrBiasChangeRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --model.norm rmsnorm --resume auto");
  expect_one_error_line(
      r, {"model.norm = rmsnorm", "saved with model.norm = layernorm", "architecture"});
  expect_run_untouched();
  r = ledgerlm("train --config " + run_ + "/config.toml --model.bias false --resume auto");
  expect_one_error_line(r, {"model.bias = false", "saved with model.bias = true", "architecture"});
  expect_run_untouched();
}

TEST_F(ResumeErrors, OptimizerChangeRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --optim.name sgd --resume auto");
  expect_one_error_line(r, {"optim.name = sgd", "adamw"});
  expect_run_untouched();
}

// The optimizer state's dtype changed (fp32 -> bf16): refused naming the key and both values
// (it read like file damage: "tensor 'embed.wte.m' is fp32, expected bf16").
TEST_F(ResumeErrors, PrecisionStateChangeRefused) {
  auto r = ledgerlm("train --config " + run_ + "/config.toml --precision.state bf16 --resume auto");
  expect_one_error_line(
      r, {"precision.state = bf16", "saved with precision.state = fp32", "optimizer state"});
  expect_run_untouched();
  expect_resumable();
}

TEST_F(ResumeErrors, CorruptedCheckpointRejected) {
  const std::string file = run_ + "/ckpt/step_000004/optimizer.safetensors";
  std::string bytes = testing::read_file(file);
  bytes[bytes.size() - 100] ^= 0x01;
  ASSERT_TRUE(testing::write_file(file, bytes));
  auto r = ledgerlm("train --config " + run_ + "/config.toml --resume auto");
  expect_one_error_line(r, {"optimizer.safetensors", "checksum"});
  EXPECT_EQ(testing::read_file(run_ + "/metrics.jsonl"), metrics_);
  // The previous checkpoint is intact and resumable by path.
  expect_resumable(run_ + "/ckpt/step_000002");
}

TEST_F(ResumeErrors, TruncatedCheckpointRejected) {
  const std::string file = run_ + "/ckpt/step_000004/model.safetensors";
  fs::resize_file(file, fs::file_size(file) - 8);
  auto r = ledgerlm("train --config " + run_ + "/config.toml --resume auto");
  expect_one_error_line(r, {"model.safetensors", "truncated"});
  EXPECT_EQ(testing::read_file(run_ + "/metrics.jsonl"), metrics_);
  expect_resumable(run_ + "/ckpt/step_000002");
}

TEST_F(ResumeErrors, NoCheckpointToResume) {
  fs::remove_all(run_ + "/ckpt");
  auto r = ledgerlm("train --config " + run_ + "/config.toml --resume auto");
  expect_one_error_line(r, {"no checkpoint to resume"});
  // A fresh run name with --resume auto simply starts.
  r = ledgerlm("train" + kCorpus.flags(out_, "fresh") + " --train.max_steps 1 --resume auto");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

std::string first_loss(const std::string& run_dir) {
  std::istringstream in(testing::read_file(run_dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto rec = nlohmann::json::parse(line);
    if (rec.contains("loss")) return rec["loss"].dump();
  }
  return "";
}

TEST_F(ResumeErrors, InitFromCheckpointOrWeights) {
  // The step-4 checkpoint and the run's final model.safetensors hold the same weights.
  auto a = ledgerlm("train" + kCorpus.flags(out_, "from_ckpt") +
                    " --train.max_steps 1 --init-from " + run_ + "/ckpt/step_000004");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  auto b = ledgerlm("train" + kCorpus.flags(out_, "from_run") +
                    " --train.max_steps 1 --init-from " + run_);
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(first_loss(out_ + "/from_ckpt"), first_loss(out_ + "/from_run"));
  EXPECT_NE(first_loss(out_ + "/from_ckpt"), first_loss(run_));  // trained weights, not init
  auto c = ledgerlm("train" + kCorpus.flags(out_, "wider") +
                    " --model.n_embd 64 --train.max_steps 1 "
                    "--init-from " +
                    run_ + "/ckpt/step_000004");
  expect_one_error_line(c, {"step_000004", "shape"});
}

}  // namespace
}  // namespace ledgerlm
