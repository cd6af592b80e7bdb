// Regression tests through the ledgerlm binary for inputs a careful user can still get wrong:
//   - paths (data dir, out_dir) with `#` and spaces work for train, the printed resume command,
//     eval and sample; run names are [A-Za-z0-9._-]+ and never `.` or `..`;
//   - `train` checks data, tokenizer and meta.json together before it creates anything, and a
//     start that fails on bad data leaves no run directory behind (the plain rerun works);
//   - prepare --val-fraction 0 gives data a run trains on without evaluation;
//   - sample refuses non-finite and out-of-range sampling parameters;
//   - a tokenizer swapped for another with the same vocabulary size is refused on resume, eval
//     and sample; an edited checkpoint meta.json (its step) is refused on resume;
//   - a FIFO given where a file is read (config, import's files, tokenizer.json, meta.json) is
//     refused at once instead of blocking forever.
// Each failure is one "ledgerlm: error: ..." line and a non-zero exit.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "data/sha256.h"
#include "tests/support/cli_test_support.h"
#include "tests/support/test_util.h"
#include "train/run/run_dir.h"
#ifdef LEDGERLM_HAVE_CUDA
#include "model/backend/cuda/cuda_device.h"
#endif

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // the command-line helpers (cli_test_support.h, test_util.h)

// What train.device = auto must find: a CUDA device, in a build that has the CUDA backend.
bool cuda_device_visible() {
#ifdef LEDGERLM_HAVE_CUDA
  return cuda_device_count() > 0;
#else
  return false;
#endif
}

std::string words_text(const std::vector<std::string>& words, int count, uint64_t seed) {
  std::string text;
  uint64_t x = seed;
  for (int i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(x >> 33) % words.size()];
    text += (i % 11 == 10) ? ".\n" : " ";
  }
  return text;
}

// Prepares `text` into DIR (bytes unless `extra` says otherwise); fails the test on error.
void prepare(const std::string& dir, const std::string& text, const std::string& extra) {
  write_file(dir + ".txt", text);
  CommandResult r =
      ledgerlm("prepare --input " + q(dir + ".txt") + " --out " + q(dir) + " " + extra);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

std::string tiny_flags(const std::string& data, const std::string& out, const std::string& name) {
  return " --data.dir " + q(data) + " --train.out_dir " + q(out) + " --train.name " + q(name) +
         " --model.n_layer 1 --model.n_head 2 --model.n_embd 16 --model.block_size 16"
         " --train.seq_len 16 --train.micro_batch 2 --train.eval_windows 2"
         " --train.eval_interval 0 --train.log_interval 100 --train.threads 1";
}

class CliInputs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::make_temp_dir("cli_inputs_");
    data_ = root_ + "/da ta#1";
    prepare(data_, words_text({"and", "the", "lord", "said", "unto", "moses"}, 3000, 1),
            "--tokenizer bytes");
  }
  static std::string root_, data_;
};
std::string CliInputs::root_, CliInputs::data_;

// CLI11's TOML reader cut `"...#..."` at the `#`: a data dir or out_dir holding `#` could not be
// resumed, evaluated or sampled, and the printed resume command broke on spaces.
TEST_F(CliInputs, PathsWithHashAndSpacesWorkEverywhere) {
  const std::string out = root_ + "/ru ns#2", run = out + "/r1";
  fs::create_directories(run);
  ASSERT_TRUE(write_file(run + "/STOP", ""));  // stops after step 1 and prints the command
  CommandResult r = ledgerlm("train" + tiny_flags(data_, out, "r1") +
                             " --train.max_steps 4 --train.overwrite true");
  ASSERT_EQ(r.exit_code, 75) << r.output;  // stopped, resumable
  const size_t at = r.output.find("resume with: ledgerlm ");
  ASSERT_NE(at, std::string::npos) << r.output;
  std::string command = r.output.substr(at + 13, r.output.find('\n', at) - at - 13);
  EXPECT_NE(command.find(q(run + "/config.toml")), std::string::npos) << command;
  command.replace(0, 8, testing::ledgerlm_binary());
  r = testing::run_command(command);  // through the shell, exactly as printed
  ASSERT_EQ(r.exit_code, 0) << command << "\n" << r.output;
  EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
  const std::string config = read_file(run + "/config.toml");
  EXPECT_NE(config.find("dir = \"" + data_ + "\""), std::string::npos) << config;
  r = ledgerlm("eval --run " + q(run) + " --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("sample --run " + q(run) + " --tokens 5 --prompt the --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// model.norm: a nanochat-style block (weightless RMSNorm, no biases) trains, evaluates
// and samples (the KV-cache decoder runs the same norms), and `train --init-from` it takes its
// norm and bias keys; the Hugging Face export, whose
// GPT2LMHeadModel has LayerNorm and biases, refuses it in one line and writes nothing; bad norm
// keys are refused in one line naming the key.
TEST_F(CliInputs, NormVariantTrainsSamplesAndExportRefuses) {
  const std::string out = root_ + "/norms", run = out + "/rms";
  const std::string variant = " --model.norm rmsnorm --model.norm_weight false --model.bias false";
  CommandResult r = ledgerlm("train" + tiny_flags(data_, out, "rms") + variant +
                             " --train.max_steps 2 --train.overwrite true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("sample --run " + q(run) + " --tokens 5 --prompt the --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = ledgerlm("eval --run " + q(run) + " --threads 1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // --init-from takes the variant's keys (a string key's value unquoted).
  r = ledgerlm("train" + tiny_flags(data_, out, "child") + " --init-from " + q(run) +
               " --train.max_steps 1 --train.overwrite true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model.norm = rmsnorm"), std::string::npos) << r.output;
  EXPECT_NE(read_file(out + "/child/config.toml").find("norm = \"rmsnorm\""), std::string::npos);
  expect_one_line_error("export --run " + q(run) + " --format hf --out " + q(out + "/hf"),
                        {"model.norm = rmsnorm", "GPT2LMHeadModel"});
  EXPECT_FALSE(fs::exists(out + "/hf"));
  expect_one_line_error("train" + tiny_flags(data_, out, "bad") + " --model.norm batchnorm",
                        {"model.norm", "layernorm or rmsnorm", "batchnorm"});
  expect_one_line_error("train" + tiny_flags(data_, out, "bad") + " --model.norm_eps 0",
                        {"model.norm_eps", "(0, 1]"});
  EXPECT_FALSE(fs::exists(out + "/bad"));
}

// A mistyped command is named with the nearest one, with or without --help (it used to say "A
// subcommand is required", and `ledgerlm study --help` printed the main help with exit 0).
TEST_F(CliInputs, UnknownCommandNamedWithTheNearest) {
  expect_one_line_error("trian --config configs/tiny_test.toml",
                        {"'trian' is not a command; did you mean 'train'?", "commands: prepare"});
  expect_one_line_error("sweeep --help", {"'sweeep' is not a command; see ledgerlm --help"});
  expect_one_line_error("memroy --params 1e6", {"did you mean 'memory'?"});
  // --help before the word printed the main help with exit 0 as well.
  expect_one_line_error("--help sweeep", {"'sweeep' is not a command; see ledgerlm --help"});
  expect_one_line_error("--help-all trian", {"'trian' is not a command; did you mean 'train'?"});
  expect_one_line_error("-h memroy", {"did you mean 'memory'?"});
}

TEST_F(CliInputs, RunNamesAreRestricted) {
  const std::string out = root_ + "/names";
  for (const char* name : {"exp#1", ".", "..", "a b"}) {
    expect_one_line_error("train" + tiny_flags(data_, out, name) + " --train.max_steps 1",
                          {"train.name", "not a run name"});
  }
  // A huge name is refused by its length, not echoed back whole (it was, in a 10 MB line).
  expect_one_line_error(
      "train" + tiny_flags(data_, out, std::string(5000, 'a')) + " --train.max_steps 1",
      {"train.name: 5000 characters; a run name has at most 200"});
  EXPECT_FALSE(fs::exists(out)) << "a refused name created " << out;
}

// train.device = auto trains on the device it finds and records that device, not "auto", in the
// run's config.toml (a resume or an eval then knows where it ran); a name that is no device and
// tf32 GEMMs on the CPU are refused before anything is created.
TEST_F(CliInputs, DeviceAutoIsResolvedAndRecorded) {
  const std::string out = root_ + "/device";
  CommandResult r = ledgerlm("train" + tiny_flags(data_, out, "auto") +
                             " --train.max_steps 1 --train.device auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string resolved = cuda_device_visible() ? "cuda" : "cpu";
  EXPECT_NE(r.output.find("train.device = auto: training on " + resolved), std::string::npos)
      << r.output;
  const std::string config = read_file(out + "/auto/config.toml");
  EXPECT_NE(config.find("device = \"" + resolved + "\""), std::string::npos) << config;
  expect_one_line_error(
      "train" + tiny_flags(data_, out, "tpu") + " --train.max_steps 1 --train.device tpu",
      {"train.device", "tpu", "cpu", "cuda", "auto"});
  expect_one_line_error(
      "train" + tiny_flags(data_, out, "tf32") + " --train.max_steps 1 --precision.matmul tf32",
      {"precision.matmul = tf32", "train.device = cuda"});
  EXPECT_FALSE(fs::exists(out + "/tpu"));
  EXPECT_FALSE(fs::exists(out + "/tf32"));
}

// precision.attention: auto resolves to our kernel on the CPU (and in fp32 runs) and the run
// records "own", not "auto"; cudnn is refused in one line, before any run directory exists, on
// the CPU, with dropout and without bf16 GEMMs (the config layer refuses before a backend is
// made, so the cuda cases need no GPU).
TEST_F(CliInputs, AttentionIsResolvedAndRecorded) {
  const std::string out = root_ + "/attention";
  CommandResult r = ledgerlm("train" + tiny_flags(data_, out, "auto") + " --train.max_steps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string config = read_file(out + "/auto/config.toml");
  EXPECT_NE(config.find("attention = \"own\""), std::string::npos) << config;
  expect_one_line_error("train" + tiny_flags(data_, out, "cpu") +
                            " --train.max_steps 1 --precision.matmul bf16 --precision.attention "
                            "cudnn",
                        {"precision.attention = cudnn needs train.device = cuda"});
  expect_one_line_error("train" + tiny_flags(data_, out, "drop") +
                            " --train.max_steps 1 --train.device cuda --precision.matmul bf16 "
                            "--model.dropout 0.1 --precision.attention cudnn",
                        {"precision.attention = cudnn has no attention dropout", "model.dropout"});
  expect_one_line_error(
      "train" + tiny_flags(data_, out, "fp32") +
          " --train.max_steps 1 --train.device cuda --precision.attention cudnn",
      {"precision.attention = cudnn runs attention in bf16", "precision.matmul is fp32"});
  expect_one_line_error(
      "train" + tiny_flags(data_, out, "bad") + " --train.max_steps 1 --precision.attention flash",
      {"precision.attention", "auto, cudnn, own", "flash"});
  for (const char* name : {"cpu", "drop", "fp32", "bad"})
    EXPECT_FALSE(fs::exists(out + "/" + name));
}

// Bad data is refused before the run directory exists, so fixing the data and running the same
// command again works (it used to be refused: "run directory ... already exists").
TEST_F(CliInputs, BadDataRefusedBeforeCreatingTheRun) {
  const std::string data = root_ + "/edited", out = root_ + "/edited_runs";
  fs::copy(data_, data);
  const std::string meta = read_file(data + "/meta.json");
  std::string edited = meta;
  edited.replace(edited.find("\"vocab_size\": 257"), 17, "\"vocab_size\": 300");
  ASSERT_TRUE(write_file(data + "/meta.json", edited));
  const std::string cmd = "train" + tiny_flags(data, out, "r") + " --train.max_steps 2";
  expect_one_line_error(cmd, {"meta.json", "vocab_size 300"});
  EXPECT_FALSE(fs::exists(out + "/r"));
  ASSERT_TRUE(write_file(data + "/meta.json", meta));
  // A token changed deep in train.bin (to one outside the vocabulary): its block fails its
  // checksum when the start reads the first step's windows, before the run directory is made.
  const std::string shard = read_file(data + "/train.bin");
  std::string damaged = shard;
  damaged[damaged.size() - 10] = '\xff';
  damaged[damaged.size() - 9] = '\x7f';
  ASSERT_TRUE(write_file(data + "/train.bin", damaged));
  expect_one_line_error(cmd, {"train.bin", "MiB block 0 of 1", "fails its CRC-32C checksum"});
  EXPECT_FALSE(fs::exists(out + "/r"));
  ASSERT_TRUE(write_file(data + "/train.bin", shard));
  CommandResult r = ledgerlm(cmd);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(CliInputs, TokenizerCheckedWithTheData) {
  const std::string data = root_ + "/bpe", out = root_ + "/bpe_runs";
  prepare(data, words_text({"alpha", "beta", "gamma", "delta"}, 3000, 2), "--vocab-size 280");
  const std::string model = read_file(data + "/tokenizer.model");
  for (const std::string& bytes : {std::string("garbage"), model.substr(0, model.size() / 2)}) {
    ASSERT_TRUE(write_file(data + "/tokenizer.model", bytes));
    expect_one_line_error("train" + tiny_flags(data, out, "r") + " --train.max_steps 1",
                          {"tokenizer.model"});
  }
  fs::remove(data + "/tokenizer.model");
  expect_one_line_error("train" + tiny_flags(data, out, "r") + " --train.max_steps 1",
                        {"tokenizer.model: cannot open"});
  EXPECT_FALSE(fs::exists(out)) << "a refused start created " << out;
}

// Prepare accepts --val-fraction 0 (all text for training); such data trains without evaluation,
// and eval says why it has no val split.
TEST_F(CliInputs, ValFractionZeroTrainsWithoutEvaluation) {
  const std::string data = root_ + "/noval", out = root_ + "/noval_runs";
  prepare(data, words_text({"one", "two", "three"}, 2000, 3), "--tokenizer bytes --val-fraction 0");
  CommandResult r = ledgerlm("train" + tiny_flags(data, out, "r") + " --train.max_steps 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("no evaluation"), std::string::npos) << r.output;
  EXPECT_EQ(read_file(out + "/r/metrics.jsonl").find("\"val_loss\""), std::string::npos);
  expect_one_line_error("eval --run " + q(out + "/r"), {"val split", "empty", "--split train"});
  r = ledgerlm("eval --run " + q(out + "/r") + " --split train --max-windows 4");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  // A val split too short for one window is refused at the start, before the run exists.
  const std::string tiny_val = root_ + "/tinyval";
  prepare(tiny_val, words_text({"one", "two"}, 2000, 4), "--tokenizer bytes --val-fraction 0.001");
  expect_one_line_error("train" + tiny_flags(tiny_val, out, "t") + " --train.max_steps 1",
                        {"val split"});
  EXPECT_FALSE(fs::exists(out + "/t"));
}

TEST_F(CliInputs, SamplingParametersMustBeFinite) {
  const std::string out = root_ + "/sample_runs";
  CommandResult r = ledgerlm("train" + tiny_flags(data_, out, "s") + " --train.max_steps 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string base = "sample --run " + q(out + "/s") + " --tokens 4 --threads 1 ";
  for (const char* bad : {"--temperature inf", "--temperature nan", "--temperature -1"})
    expect_one_line_error(base + bad, {"--temperature"});
  for (const char* bad : {"--top-p nan", "--top-p 0", "--top-p 1.5", "--top-p inf"})
    expect_one_line_error(base + bad, {"--top-p"});
  expect_one_line_error(base + "--top-k -1", {"--top-k"});
  EXPECT_EQ(ledgerlm(base + "--temperature 0").exit_code, 0);
}

// Two BPE tokenizers with the same vocabulary size: swapping tokenizer.model used to resume,
// evaluate and sample silently with the wrong one. The data directory's tokenizer is what
// training and eval on a split read: replaced, they refuse. sample reads the run's own copy
// (runs/NAME/tokenizer), which is still the right one, so it goes on working; that copy
// replaced, it refuses too.
TEST_F(CliInputs, SwappedTokenizerRefused) {
  const std::string a = root_ + "/tok_a", b = root_ + "/tok_b", out = root_ + "/swap_runs";
  prepare(a, words_text({"north", "south", "east", "west", "wind"}, 4000, 5), "--vocab-size 300");
  prepare(b, words_text({"red", "green", "blue", "yellow", "black"}, 4000, 6), "--vocab-size 300");
  ASSERT_EQ(nlohmann::json::parse(read_file(a + "/meta.json"))["vocab_size"],
            nlohmann::json::parse(read_file(b + "/meta.json"))["vocab_size"]);
  const std::string run = out + "/r";
  CommandResult r = ledgerlm("train" + tiny_flags(a, out, "r") + " --train.max_steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  ASSERT_NE(read_file(run + "/config.toml").find("tokenizer_id = \"bpe:"), std::string::npos);
  fs::copy_file(b + "/tokenizer.model", a + "/tokenizer.model",
                fs::copy_options::overwrite_existing);
  expect_one_line_error(
      "train --config " + q(run + "/config.toml") + " --train.max_steps 4 --resume auto",
      {"data.tokenizer_id", "tokenizer was replaced"});
  // Without the run's config the checkpoint's record refuses it.
  expect_one_line_error("train" + tiny_flags(a, out, "r") + " --train.max_steps 4 --resume auto",
                        {"data.tokenizer_id", "cannot resume"});
  expect_one_line_error("eval --run " + q(run), {"tokenizer was replaced"});
  r = ledgerlm("sample --run " + q(run) + " --tokens 2");
  EXPECT_EQ(r.exit_code, 0) << "sample reads the run's own copy: " << r.output;
  fs::copy_file(b + "/tokenizer.model", run + "/tokenizer/tokenizer.model",
                fs::copy_options::overwrite_existing);
  expect_one_line_error("sample --run " + q(run) + " --tokens 2", {"tokenizer was replaced"});
}

// The Hugging Face GPT-2 tokenizer through the binary: prepare hf:DIR (the committed fixture of
// tests/unit/data/test_data_tokenizer_hf.cpp), train, sample; the run records hf-bpe:SHA-256 of
// tokenizer.json and refuses the data once that file is replaced, even by an equivalent one.
TEST_F(CliInputs, HfTokenizerRunRefusesAReplacedTokenizerJson) {
  const std::string fixture = testing::source_dir() + "/tests/reference/fixtures/hf_tokenizer";
  const std::string data = root_ + "/hf_data", out = root_ + "/hf_runs", run = out + "/h";
  expect_one_line_error("prepare --input " + q(data_ + ".txt") + " --out " + q(data) +
                            " --tokenizer hf:" + q(root_ + "/no_such_dir"),
                        {"no_such_dir: has no tokenizer.json"});
  prepare(data, words_text({"it's", "the", "LORD's", "day", "42", "caf\u00e9"}, 3000, 7),
          "--tokenizer hf:" + q(fixture));
  EXPECT_EQ(nlohmann::json::parse(read_file(data + "/meta.json"))["tokenizer"], "hf-bpe");
  CommandResult r = ledgerlm("train" + tiny_flags(data, out, "h") + " --train.max_steps 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string id = "hf-bpe:" + sha256_hex(read_file(fixture + "/tokenizer.json"));
  EXPECT_NE(read_file(run + "/config.toml").find("tokenizer_id = \"" + id + "\""),
            std::string::npos);
  r = ledgerlm("sample --run " + q(run) + " --prompt " + q("it's the") + " --tokens 3");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  write_file(data + "/tokenizer.json",
             nlohmann::json::parse(read_file(fixture + "/tokenizer.json")).dump(1));
  // sample reads the run's own copy of tokenizer.json, untouched; the copy replaced by the
  // equivalent file is refused as the data's is.
  r = ledgerlm("sample --run " + q(run) + " --prompt " + q("it's the") + " --tokens 3");
  EXPECT_EQ(r.exit_code, 0) << "sample reads the run's own copy: " << r.output;
  write_file(run + "/tokenizer/tokenizer.json", read_file(data + "/tokenizer.json"));
  expect_one_line_error("sample --run " + q(run) + " --tokens 2", {"tokenizer was replaced"});
  expect_one_line_error(
      "train --config " + q(run + "/config.toml") + " --train.max_steps 4 --resume auto",
      {"data.tokenizer_id", "tokenizer was replaced"});
}

// Editing a checkpoint's step used to rewind a resume silently (and overwrite later
// checkpoints); meta.json's own checksum refuses it.
TEST_F(CliInputs, EditedCheckpointStepRefused) {
  const std::string out = root_ + "/edit_runs", run = out + "/r";
  CommandResult r =
      ledgerlm("train" + tiny_flags(data_, out, "r") + " --train.max_steps 4 --ckpt.interval 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string meta_path = run + "/ckpt/step_000004/meta.json";
  std::string meta = read_file(meta_path);
  const size_t at = meta.find("\"step\": 4");
  ASSERT_NE(at, std::string::npos);
  meta.replace(at, 9, "\"step\": 2");
  ASSERT_TRUE(write_file(meta_path, meta));
  const std::string metrics = read_file(run + "/metrics.jsonl");
  expect_one_line_error(
      "train --config " + q(run + "/config.toml") + " --train.max_steps 6 --resume auto",
      {"step_000004/meta.json", "fails its checksum"});
  EXPECT_EQ(read_file(run + "/metrics.jsonl"), metrics);
}

// A FIFO without a writer, named where ledgerlm reads a file, blocked the open (or the read)
// forever without a word. Every such read refuses anything but a regular file, in one line that
// names the file and what it is. Each command runs under `timeout -s KILL 20`: a regression fails
// (killed, no error line) instead of hanging the suite; a refusal takes milliseconds.
TEST_F(CliInputs, FifoInputsRefusedInOneLine) {
  const std::string dir = testing::make_temp_dir("cli_inputs_fifo_");
  auto fifo = [](const std::string& path) {
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path << ": " << std::strerror(errno);
  };
  auto refused = [&](const std::string& args, const std::string& path) {
    expect_one_line_error(args, {"'" + path + "' is a FIFO, expected a regular file"},
                          "timeout -s KILL 20 ");
  };
  // --config
  fifo(dir + "/config.toml");
  refused("train --config " + q(dir + "/config.toml"), dir + "/config.toml");
  // import: config.json, then model.safetensors
  const std::string hf = testing::source_dir() + "/tests/reference/fixtures/hf_gpt2_tiny";
  for (const std::string f : {"config.json", "model.safetensors"}) {
    const std::string model = dir + "/model_" + f;
    fs::create_directories(model);
    for (const std::string g : {"config.json", "model.safetensors"})
      if (g != f) fs::copy_file(hf + "/" + g, model + "/" + g);
    fifo(model + "/" + f);
    refused("import --format hf --from " + q(model) + " --out " + q(dir + "/runs_" + f),
            model + "/" + f);
    EXPECT_FALSE(fs::exists(dir + "/runs_" + f)) << "a refused import left its output";
  }
  // prepare --tokenizer hf:DIR with tokenizer.json
  fs::create_directories(dir + "/tok");
  fifo(dir + "/tok/tokenizer.json");
  refused("prepare --input " + q(data_ + ".txt") + " --out " + q(dir + "/data") +
              " --tokenizer hf:" + q(dir + "/tok"),
          dir + "/tok/tokenizer.json");
  // A data directory's meta.json
  fs::create_directories(dir + "/data_fifo");
  for (const auto& e : fs::directory_iterator(data_))
    if (e.path().filename() != "meta.json")
      fs::copy_file(e.path(), fs::path(dir + "/data_fifo") / e.path().filename());
  fifo(dir + "/data_fifo/meta.json");
  refused("train" + tiny_flags(dir + "/data_fifo", dir + "/runs", "f") + " --train.max_steps 1",
          dir + "/data_fifo/meta.json");
}

}  // namespace
}  // namespace ledgerlm
