// validate() of the run-level config sections.
#include "train/config/run_config.h"

#include "train/config/attention_choice.h"

#include <cctype>

#include "model/base/check.h"
#include "model/base/dtype.h"
#include "model/param_table.h"
#include "optim/optim_traits.h"

namespace ledgerlm {
namespace {

void require_one_of(const std::string& key, const std::string& value,
                    std::initializer_list<const char*> allowed) {
  std::string list;
  for (const char* a : allowed) {
    if (value == a) return;
    list += list.empty() ? a : std::string(", ") + a;
  }
  fail(key + ": expected one of " + list + " (got '" + value + "')");
}

// Run names become one directory under out_dir and appear unquoted in printed commands.
bool is_run_name(const std::string& name) {
  if (name.empty() || name == "." || name == "..") return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  return true;
}

}  // namespace

// The defaults are what is compared, not whether a key was written: every run's resolved
// config.toml writes all of them.
void lora_check_off(const LoraConfig& lora) {
  if (lora.enabled()) return;
  const LoraConfig defaults;
  std::string set;
  auto add = [&](const std::string& part) { set += (set.empty() ? "" : ", ") + part; };
  if (lora.targets != defaults.targets) add("lora.targets = \"" + lora.targets + "\"");
  if (!(lora.alpha == defaults.alpha)) add(error_message("lora.alpha = ", lora.alpha));
  if (!(lora.dropout == defaults.dropout)) add(error_message("lora.dropout = ", lora.dropout));
  LLM_REQUIRE(set.empty(), "lora.rank = 0 means no adapters (every weight trains), but ", set,
              " asked for them: set lora.rank >= 1 for a LoRA fine-tune, or leave the other "
              "[lora] keys at their defaults for full training");
}

void DataConfig::validate() const {
  LLM_REQUIRE(!dir.empty(), "data.dir: expected a directory");
}

void TrainConfig::validate() const {
  // A directory name: at most 200 bytes (filesystems stop at 255, and the run's temporaries add
  // suffixes). Checked first, so that a huge value is not echoed back whole.
  constexpr size_t kMaxRunName = 200;
  LLM_REQUIRE(name.size() <= kMaxRunName, "train.name: ", name.size(),
              " characters; a run name has at most ", kMaxRunName);
  LLM_REQUIRE(is_run_name(name), "train.name: '", name,
              "' is not a run name (letters, digits, '.', '_' and '-', and not '.' or '..')");
  LLM_REQUIRE(!out_dir.empty(), "train.out_dir: expected a directory");
  require_one_of("train.device", device, {"cpu", "cuda", "auto"});
  // Sizes: a micro-batch's B x T token rows are one GEMM dimension (32-bit), and
  // world x B x T x A tokens per step are counted in int64 (run_config_check_sizes).
  constexpr int64_t kMaxInt32 = 2147483647;
  LLM_REQUIRE(micro_batch > 0 && micro_batch <= kMaxInt32, "train.micro_batch: expected 1..",
              kMaxInt32, " (got ", micro_batch, ")");
  LLM_REQUIRE(seq_len > 0 && seq_len <= kMaxBlockSize, "train.seq_len: expected 1..", kMaxBlockSize,
              " (got ", seq_len, ")");
  LLM_REQUIRE(micro_batch * seq_len <= kMaxInt32,
              "train.micro_batch x train.seq_len = ", micro_batch * seq_len, ": expected at most ",
              kMaxInt32, " token rows per micro-batch (a 32-bit GEMM dimension)");
  LLM_REQUIRE(accum > 0 && accum <= kMaxInt32, "train.accum: expected 1..", kMaxInt32, " (got ",
              accum, ")");
  LLM_REQUIRE(max_steps >= 0, "train.max_steps: expected >= 0 (got ", max_steps, ")");
  LLM_REQUIRE(max_tokens >= 0, "train.max_tokens: expected >= 0 (got ", max_tokens, ")");
  LLM_REQUIRE(max_seconds >= 0, "train.max_seconds: expected >= 0 (got ", max_seconds, ")");
  LLM_REQUIRE(max_steps > 0 || max_tokens > 0 || max_seconds > 0,
              "train: set a budget: train.max_steps, train.max_tokens or train.max_seconds");
  LLM_REQUIRE(eval_interval >= 0, "train.eval_interval: expected >= 0 (got ", eval_interval, ")");
  LLM_REQUIRE(eval_windows > 0, "train.eval_windows: expected > 0 (got ", eval_windows, ")");
  LLM_REQUIRE(log_interval > 0, "train.log_interval: expected > 0 (got ", log_interval, ")");
  LLM_REQUIRE(save_interval >= 0, "train.save_interval: expected >= 0 (got ", save_interval, ")");
  LLM_REQUIRE(threads >= 0, "train.threads: expected >= 0 (got ", threads, ")");
  LLM_REQUIRE(gns_ema >= 0 && gns_ema < 1, "train.gns_ema: expected 0 <= decay < 1 (got ", gns_ema,
              ")");
  LLM_REQUIRE(gns_interval >= 1, "train.gns_interval: expected >= 1 (got ", gns_interval, ")");
}

void PrecisionConfig::validate() const {
  require_one_of("precision.params", params, {"fp32", "bf16", "fp16"});
  require_one_of("precision.grads", grads, {"fp32", "bf16", "fp16"});
  require_one_of("precision.grad_accum", grad_accum, {"auto", "fp32", "bf16", "fp16"});
  require_one_of("precision.master", master, {"fp32", "none"});
  require_one_of("precision.state", state, {"fp32", "bf16"});
  require_one_of("precision.rounding", rounding, {"nearest", "stochastic"});
  require_one_of("precision.matmul", matmul, {"fp32", "tf32", "bf16"});
  LLM_REQUIRE(matmul != "bf16" || params != "fp16",
              "precision.matmul: bf16 needs precision.params fp32 or bf16 (fp16 weights would be "
              "rounded a second time)");
  require_one_of("precision.attention", attention, {"auto", "cudnn", "own"});
  require_one_of("precision.subnormals", subnormals, {"flush", "keep"});
  require_one_of("precision.loss_scale", loss_scale, {"auto", "dynamic", "static", "none"});
  LLM_REQUIRE(init_scale > 0, "precision.init_scale: expected > 0 (got ", init_scale, ")");
  LLM_REQUIRE(growth_interval > 0, "precision.growth_interval: expected > 0");
  LLM_REQUIRE(growth_factor >= 1, "precision.growth_factor: expected >= 1");
  LLM_REQUIRE(backoff_factor > 0 && backoff_factor < 1,
              "precision.backoff_factor: expected in (0, 1)");
  LLM_REQUIRE(max_consecutive_skips > 0, "precision.max_consecutive_skips: expected > 0");
}

void DistConfig::validate() const {
  LLM_REQUIRE(zero >= 0 && zero <= 3, "dist.zero: expected 0, 1, 2 or 3 (got ", zero, ")");
  LLM_REQUIRE(timeout_s > 0, "dist.timeout_s: expected seconds > 0 (got ", timeout_s, ")");
  require_one_of("dist.comm", comm, {"auto", "mpi", "nccl"});
}

void CkptConfig::validate() const {
  LLM_REQUIRE(interval >= 0, "ckpt.interval: expected >= 0 (got ", interval, ")");
  LLM_REQUIRE(keep >= 1, "ckpt.keep: expected >= 1 (got ", keep, ")");
}

void RunConfig::validate() const {
  model.validate();
  lora_check_off(model.lora);
  data.validate();
  train.validate();
  optim.validate();
  precision.validate();
  dist.validate();
  ckpt.validate();
  run_config_check_sizes(*this);  // before anything builds a table of model.n_layer blocks
  // Patterns that match nothing, or freeze everything, named before the run starts. Past
  // kWholeTableMaxBlocks blocks building the table here would itself cost what memory admission is
  // about to refuse (1e6 blocks: ~4 GB and ~10 s), so there the same check runs where the run
  // builds its table (train/step/placement.cpp), after admission.
  if (!train.freeze.empty() && model.n_layer <= kWholeTableMaxBlocks) {
    ParamTable table = param_table_build(model);
    param_table_freeze(&table, train.freeze);
  }
  // precision.attention against the device, dropout and matmul.
  attention_config_check(precision.attention, train.device, precision.matmul, model.dropout);
  LLM_REQUIRE(train.seq_len <= model.block_size, "train.seq_len ", train.seq_len,
              " exceeds model.block_size ", model.block_size, " (the model's context)");
  // An optimizer key that defaults to the run's length in steps (AdEMAMix's warmup).
  const OptimTraits* ot = optim_traits_find(optim.name);
  LLM_REQUIRE(ot == nullptr || ot->needs_run_length == nullptr || !ot->needs_run_length(optim) ||
                  train.max_steps > 0 || train.max_tokens > 0,
              "optim.", ot->run_length_key,
              ": a wall-clock budget alone (train.max_seconds) gives no run "
              "length in steps to warm alpha and beta3 up over; set it to the steps you expect");
}

void run_config_check_sizes(const RunConfig& cfg) {
  // Generous upper bounds (GPT-2's tensors, 64 bytes per parameter: more than any precision and
  // optimizer keeps; per layer 32 activations of C, three of F and two of H x T per token, then the
  // logits),
  // kept below 2^62 bytes so that sums of a few of them cannot reach 2^63.
  constexpr double kMaxBytes = 4611686018427387904.0;  // 2^62
  const ModelConfig& m = cfg.model;
  const double L = static_cast<double>(m.n_layer), C = static_cast<double>(m.n_embd),
               H = static_cast<double>(m.n_head), V = static_cast<double>(m.padded_vocab()),
               P = static_cast<double>(m.block_size), F = static_cast<double>(m.ffn_width());
  // Per block: qkv and attention projection (4C^2 + 4C), the MLP (3CF + 2F + C: SwiGLU's three
  // matrices bound the two of the others), two norms (4C); an untied head counts (V C) again.
  const double params = L * (4 * C * C + 3 * C * F + 9 * C + 2 * F) + (2 * V + P) * C + 2 * C;
  LLM_REQUIRE(params * 64 <= kMaxBytes, "model.n_layer = ", m.n_layer,
              " x model.n_embd = ", m.n_embd, ": ~", params,
              " parameters, more than 64-bit byte counts can hold (at most ~", kMaxBytes / 64,
              "); make the model smaller");
  const double B = static_cast<double>(cfg.train.micro_batch),
               T = static_cast<double>(cfg.train.seq_len);
  const double activations = 4 * B * T * (L * (32 * C + 3 * F + 2 * H * T) + 2 * V);
  LLM_REQUIRE(activations <= kMaxBytes, "train.micro_batch = ", cfg.train.micro_batch,
              " x train.seq_len = ", cfg.train.seq_len, " with model.n_layer = ", m.n_layer, ": ~",
              activations,
              " bytes of activations per micro-batch, more than 64-bit byte counts can hold; "
              "make the micro-batch smaller");
  const double tokens = B * T * static_cast<double>(cfg.train.accum);
  LLM_REQUIRE(tokens <= kMaxBytes / 1024, "train.accum = ", cfg.train.accum,
              ": train.micro_batch x train.seq_len x train.accum = ", tokens,
              " tokens per rank and step, more than the token counters can hold");
}

}  // namespace ledgerlm
