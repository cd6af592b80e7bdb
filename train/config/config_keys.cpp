// Config key registry, typed setting from flag text and the resolved config as TOML.
#include "train/config/config_keys.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "data/tokenizer.h"
#include "model/base/check.h"
#include "optim/optim_traits.h"

namespace ledgerlm {
namespace {

#define LLM_KEY(sec, obj, field, type, help) \
  keys.push_back({sec, #field, type, static_cast<void*>(&(obj).field), help, KeyRole::kSetting})
#define LLM_ARCH_KEY(sec, obj, field, type, help) \
  keys.push_back(                                 \
      {sec, #field, type, static_cast<void*>(&(obj).field), help, KeyRole::kArchitecture})
#define LLM_STATE_KEY(sec, obj, field, type, help) \
  keys.push_back({sec, #field, type, static_cast<void*>(&(obj).field), help, KeyRole::kSavedState})

// A TOML basic string: quotes, backslashes and control characters escaped.
std::string toml_quote(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04X", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

std::vector<ConfigKey> config_keys(RunConfig& c) {
  std::vector<ConfigKey> keys;
  const KeyType I = KeyType::kInt, F = KeyType::kFloat, B = KeyType::kBool, S = KeyType::kString;
  LLM_ARCH_KEY("model", c.model, vocab_size, I, "vocabulary size (0: from the data's meta.json)");
  LLM_ARCH_KEY("model", c.model, n_layer, I, "transformer blocks");
  LLM_ARCH_KEY("model", c.model, n_head, I, "attention heads");
  LLM_ARCH_KEY("model", c.model, n_embd, I, "model width C");
  LLM_ARCH_KEY("model", c.model, ffn_hidden, I,
               "MLP hidden width F (0: 4 x n_embd; swiglu: Llama's rule)");
  LLM_ARCH_KEY("model", c.model, block_size, I, "context length (max sequence)");
  LLM_KEY("model", c.model, dropout, F, "attention and residual dropout");
  LLM_KEY("model", c.model, recompute, S, "activation checkpointing: none | mlp | block");
  // MLP variants, the head and its soft-cap (docs/blocks.md).
  LLM_ARCH_KEY("model", c.model, mlp, S, "MLP: gelu | swiglu | relu2");
  LLM_ARCH_KEY("model", c.model, tie_embeddings, B,
               "head shares the token embedding (false: lm_head)");
  LLM_ARCH_KEY("model", c.model, logit_softcap, F, "logits = cap * tanh(logits / cap) (0: off)");
  // Attention variants (docs/blocks.md).
  LLM_ARCH_KEY("model", c.model, position, S,
               "positions: learned (wpe table) | rope (rotary q, k)");
  LLM_ARCH_KEY("model", c.model, rope_theta, F, "rotary base (model.position = rope)");
  LLM_ARCH_KEY("model", c.model, n_kv_head, I, "k/v heads (0: n_head; fewer: grouped-query)");
  LLM_ARCH_KEY("model", c.model, qk_norm, B,
               "weightless RMS norm of each q and k head, before rope");
  // Norms and biases (docs/blocks.md).
  LLM_ARCH_KEY("model", c.model, norm, S, "the norms: layernorm (GPT-2) | rmsnorm (Llama)");
  LLM_ARCH_KEY("model", c.model, norm_weight, B, "the norms have a learnable weight (false: none)");
  LLM_ARCH_KEY("model", c.model, norm_eps, F, "eps under the norms' square root");
  LLM_ARCH_KEY("model", c.model, bias, B, "biases on every linear layer and LayerNorm");
  LLM_ARCH_KEY("model", c.model, qkv_bias, B,
               "bias on the q, k, v projection even with bias = false");
  LLM_STATE_KEY("lora", c.model.lora, rank, I, "adapter rank r (0: no adapters)");
  LLM_KEY("lora", c.model.lora, alpha, F, "adapter scale numerator: updates scale by alpha / r");
  LLM_KEY("lora", c.model.lora, dropout, F, "dropout on the adapters' input");
  LLM_STATE_KEY(
      "lora", c.model.lora, targets, S,
      "adapted layers, comma-separated: qkv, attn_proj, mlp_fc, mlp_proj (Llama names: q,k,v "
      "together, o, up, down)");

  LLM_KEY("data", c.data, dir, S, "prepared data directory (ledgerlm prepare --out)");
  LLM_STATE_KEY(
      "data", c.data, tokenizer_id, S,
      "bytes | bpe:SHA256 of tokenizer.model | hf-bpe:SHA256 of tokenizer.json (empty: the "
      "data's; a run refuses another)");

  LLM_KEY("train", c.train, name, S, "run name: outputs go to OUT_DIR/NAME");
  LLM_KEY("train", c.train, out_dir, S, "directory holding runs");
  LLM_KEY("train", c.train, device, S, "cpu | cuda | auto (cuda when a GPU is visible)");
  LLM_KEY("train", c.train, micro_batch, I, "sequences per micro-batch per rank (B)");
  LLM_KEY("train", c.train, seq_len, I, "tokens per sequence (T)");
  LLM_KEY("train", c.train, accum, I, "micro-batches accumulated per step (A)");
  LLM_KEY("train", c.train, max_steps, I, "budget: optimizer steps");
  LLM_KEY("train", c.train, max_tokens, I, "budget: tokens");
  LLM_KEY("train", c.train, max_seconds, F, "budget: wall-clock seconds");
  LLM_KEY("train", c.train, eval_interval, I, "steps between evaluations (0: end only)");
  LLM_KEY("train", c.train, eval_windows, I, "val windows per evaluation");
  LLM_KEY("train", c.train, log_interval, I, "steps between progress lines");
  LLM_KEY("train", c.train, save_interval, I, "steps between weight saves (0: end only)");
  LLM_KEY("train", c.train, seed, I, "seed of init, data order, dropout");
  LLM_KEY("train", c.train, threads, I, "CPU threads (0: cores / local ranks)");
  LLM_KEY("train", c.train, overwrite, B, "reuse an existing run directory");
  LLM_STATE_KEY(
      "train", c.train, freeze, S,
      "frozen tensors: comma-separated globs over parameter names or their Hugging Face names, "
      "e.g. embed.*,block.0.*");
  LLM_KEY("train", c.train, tensorboard, B,
          "write TensorBoard events (runs/NAME/events.out.tfevents.*)");
  LLM_KEY("train", c.train, gns, B,
          "log the gradient noise scale B_simple (world x accum > 1, dist.zero 0-1)");
  LLM_KEY("train", c.train, gns_ema, F, "gns: EMA decay of the two noise-scale estimates");
  LLM_KEY("train", c.train, gns_interval, I,
          "gns: measure on every Nth step (the EMAs advance per measurement)");
  LLM_KEY("train", c.train, memory_check, B,
          "refuse a run whose predicted memory exceeds what this host has (false: start anyway)");

  LLM_STATE_KEY("optim", c.optim, name, S, optim_names_text(" | ", " | "));
  LLM_KEY("optim", c.optim, impl, S, "loop | foreach | fused");
  LLM_KEY("optim", c.optim, lr, F, "peak learning rate");
  LLM_KEY("optim", c.optim, beta1, F, "first-moment decay");
  LLM_KEY("optim", c.optim, beta2, F, "second-moment decay");
  LLM_KEY("optim", c.optim, eps, F, "denominator epsilon");
  LLM_KEY("optim", c.optim, weight_decay, F, "weight decay (2-D weights)");
  LLM_KEY("optim", c.optim, decay_embeddings, B, "decay the embeddings too");
  LLM_KEY("optim", c.optim, lr_mult_embedding, F, "LR multiplier of the embeddings");
  LLM_KEY("optim", c.optim, lr_mult_nodecay, F, "LR multiplier of biases and norm weights");
  LLM_KEY("optim", c.optim, momentum, F, "sgd momentum (0: plain)");
  LLM_KEY("optim", c.optim, nesterov, B, "sgd Nesterov momentum");
  LLM_KEY("optim", c.optim, wd_mode, S, "sgd weight decay: decoupled | l2");
  LLM_KEY("optim", c.optim, lamb_phi, S, "lamb trust numerator: identity | clamp");
  LLM_KEY("optim", c.optim, trust_lo, F, "lamb clamp low");
  LLM_KEY("optim", c.optim, trust_hi, F, "lamb clamp high");
  LLM_KEY("optim", c.optim, lars_eta, F, "lars trust coefficient");
  LLM_KEY("optim", c.optim, lars_exclude_1d, B, "lars: 1-D tensors use local lr 1");
  LLM_KEY("optim", c.optim, adafactor_eps1, F, "adafactor eps1");
  LLM_KEY("optim", c.optim, adafactor_eps2, F, "adafactor eps2");
  LLM_KEY("optim", c.optim, adafactor_d, F, "adafactor clipping threshold d");
  LLM_KEY("optim", c.optim, adafactor_beta1, F, "adafactor momentum (0: none)");
  LLM_KEY("optim", c.optim, adafactor_relative_step, B, "adafactor relative step size");
  LLM_KEY("optim", c.optim, adafactor_decay_rate, F, "adafactor beta2_t = 1 - t^-rate");
  LLM_KEY("optim", c.optim, block_size, I, "adamw8bit quantization block");
  LLM_KEY("optim", c.optim, embedding_fp32_state, B, "adamw8bit: embeddings keep fp32 state");
  LLM_KEY("optim", c.optim, lion_beta1, F, "lion: interpolation of the update's sign");
  LLM_KEY("optim", c.optim, lion_beta2, F, "lion: momentum decay");
  LLM_KEY("optim", c.optim, sf_weight_lr_power, F,
          "adamw_schedulefree: averaging weight lr_max^power, 0..16 (the authors' 2)");
  LLM_KEY("optim", c.optim, ademamix_beta3, F,
          "ademamix: slow EMA decay (after warmup), below 1 - 1e-8");
  LLM_KEY("optim", c.optim, ademamix_alpha, F, "ademamix: slow EMA weight (after warmup)");
  LLM_KEY("optim", c.optim, ademamix_warmup, I,
          "ademamix: alpha and beta3 warmup steps (0: the run's length)");
  LLM_KEY("optim", c.optim, muon_momentum, F, "muon: momentum of the 2-D weights");
  LLM_KEY("optim", c.optim, muon_nesterov, B, "muon: Nesterov momentum");
  LLM_KEY("optim", c.optim, ns_steps, I, "muon: Newton-Schulz iterations");
  LLM_KEY("optim", c.optim, ns_eps, F, "muon: Newton-Schulz norm floor");
  LLM_KEY("optim", c.optim, muon_adjust_lr, S,
          "muon: LR shape factor: original (sqrt(max(1,out/in))) | match_rms_adamw "
          "(0.2 sqrt(max(out,in)))");
  LLM_KEY("optim", c.optim, muon_adamw_lr, F,
          "muon: peak LR of its AdamW group (embeddings, biases, norms)");
  LLM_STATE_KEY("optim", c.optim, ema_half_life, F,
                "half-life in tokens of the weight average that evals and the run's weights "
                "use (0: off)");
  LLM_KEY("optim", c.optim, schedule, S, "constant | cosine | linear");
  LLM_KEY("optim", c.optim, warmup_steps, I, "linear warmup steps");
  LLM_KEY("optim", c.optim, min_lr_ratio, F, "LR floor as a fraction of optim.lr");
  LLM_KEY("optim", c.optim, grad_clip, F, "clip gradients to this global norm (0: off)");
  LLM_KEY("optim", c.optim, offload, S,
          "master and optimizer state: none | host (device runs: host memory, CPU step) | "
          "disk (files, streamed)");
  LLM_KEY("optim", c.optim, offload_dir, S,
          "optim.offload = disk: directory of the state files (empty: RUN_DIR/offload; else "
          "OFFLOAD_DIR/NAME-HASH, one per run directory)");
  LLM_KEY("optim", c.optim, offload_staging_mb, F,
          "optim.offload = disk: RAM staging arena in MiB (raised to what LAMB, LARS and "
          "Adafactor need for one whole tensor)");

  LLM_KEY("precision", c.precision, params, S, "compute copy: fp32 | bf16 | fp16");
  LLM_KEY("precision", c.precision, grads, S, "gradients: fp32 | bf16 | fp16");
  LLM_KEY("precision", c.precision, grad_accum, S, "accumulation: auto | fp32 | bf16 | fp16");
  LLM_KEY("precision", c.precision, master, S, "master weights: fp32 | none");
  LLM_KEY("precision", c.precision, state, S,
          "optimizer state storage (m, v, momentum): fp32 | bf16");
  LLM_KEY("precision", c.precision, rounding, S, "write of the compute copy: nearest | stochastic");
  LLM_KEY("precision", c.precision, matmul, S,
          "linear-layer GEMM inputs: fp32 | tf32 (cuda) | bf16 (rounded, fp32 sums)");
  LLM_KEY("precision", c.precision, attention, S,
          "attention: auto (cudnn on cuda with matmul bf16 when cuDNN loads, else own) | cudnn "
          "(cuDNN fused SDPA, bf16) | own");
  LLM_KEY("precision", c.precision, subnormals, S,
          "fp32/fp64 values below 2^-126 / 2^-1022 on the CPU threads: flush (to zero, FTZ+DAZ: "
          "no slow assists) | keep (IEEE gradual underflow)");
  LLM_KEY("precision", c.precision, loss_scale, S, "auto | dynamic | static | none");
  LLM_KEY("precision", c.precision, init_scale, F, "initial (or static) loss scale");
  LLM_KEY("precision", c.precision, growth_interval, I, "good steps before the scale grows");
  LLM_KEY("precision", c.precision, growth_factor, F, "scale growth factor");
  LLM_KEY("precision", c.precision, backoff_factor, F, "scale backoff on overflow");
  LLM_KEY("precision", c.precision, max_consecutive_skips, I, "fp16: stop after this many skips");

  LLM_KEY("dist", c.dist, zero, I, "ZeRO stage 0..3");
  LLM_KEY("dist", c.dist, reshard_after_forward, B,
          "ZeRO-3: free gathered weights after forward (false: keep until the step)");
  LLM_KEY("dist", c.dist, timeout_s, F,
          "seconds a rank waits for the others at a collective before the job ends naming the "
          "ranks that did not take part; in effect: max(this, 5 x the slowest step, evaluation "
          "or save so far)");
  LLM_KEY("dist", c.dist, comm, S,
          "device-tensor collectives: auto (nccl on cuda with several ranks when it loads, else "
          "mpi) | mpi (staged through host memory) | nccl (required: an error when unavailable)");

  LLM_KEY("ckpt", c.ckpt, interval, I, "steps between full checkpoints (0: end only)");
  LLM_KEY("ckpt", c.ckpt, keep, I, "checkpoints kept");
  return keys;
}

void config_set(const ConfigKey& key, const std::string& value, const std::string& origin) {
  auto bad = [&](const char* expected) {
    fail(error_message(origin, ": key '", key.full(), "' expects ", expected, " (got '", value,
                       "')"));
  };
  switch (key.type) {
    case KeyType::kInt: {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno) {
        // Accept integral floats written as 1e6.
        double d = std::strtod(value.c_str(), &end);
        if (value.empty() || *end != '\0' || d != std::floor(d) || std::fabs(d) > 9e18)
          bad("an integer");
        v = static_cast<long long>(d);
      }
      *static_cast<int64_t*>(key.field) = v;
      break;
    }
    case KeyType::kFloat: {
      char* end = nullptr;
      double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(v)) bad("a number");
      *static_cast<double*>(key.field) = v;
      break;
    }
    case KeyType::kBool: {
      if (value == "true") {
        *static_cast<bool*>(key.field) = true;
      } else if (value == "false") {
        *static_cast<bool*>(key.field) = false;
      } else {
        bad("true or false");
      }
      break;
    }
    case KeyType::kString:
      // config.toml stores strings as TOML, which is UTF-8 text.
      if (!utf8_is_valid(value) || value.find('\0') != std::string::npos) bad("UTF-8 text");
      *static_cast<std::string*>(key.field) = value;
      break;
  }
}

std::string config_value_text(const ConfigKey& key) {
  std::ostringstream os;
  switch (key.type) {
    case KeyType::kInt:
      os << *static_cast<int64_t*>(key.field);
      break;
    case KeyType::kFloat: {
      // Shortest text that reads back to the same double (0.0006, not 0.00059999999999999995).
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof buf, *static_cast<double*>(key.field));
      std::string s(buf, res.ptr);
      if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
      return s;
    }
    case KeyType::kBool:
      os << (*static_cast<bool*>(key.field) ? "true" : "false");
      break;
    case KeyType::kString:
      return toml_quote(*static_cast<std::string*>(key.field));
  }
  return os.str();
}

std::string config_display_text(const ConfigKey& key) {
  return key.type == KeyType::kString ? *static_cast<std::string*>(key.field)
                                      : config_value_text(key);
}

std::string config_to_toml(const std::vector<ConfigKey>& keys) {
  std::ostringstream os;
  std::string section;
  for (const auto& k : keys) {
    if (k.section != section) {
      if (!section.empty()) os << "\n";
      section = k.section;
      os << "[" << section << "]\n";
    }
    os << k.key << " = " << config_value_text(k) << "\n";
  }
  return os.str();
}

}  // namespace ledgerlm
