// The full configuration of a run: one struct per TOML section, each with defaults and a
// validate() naming the offending key. Every key is also a `--section.key` flag (config_cli.h).
#pragma once

#include <cstdint>
#include <string>

#include "model/model_config.h"
#include "optim/optim_config.h"

namespace ledgerlm {

struct DataConfig {
  std::string dir = "data_out/kjv";  // a directory written by `ledgerlm prepare`
  // The data's tokenizer ("bytes" | "bpe:SHA256"; "" = take the data's, like model.vocab_size =
  // 0). A run records it, so resuming or evaluating with another tokenizer is refused.
  std::string tokenizer_id;
  void validate() const;
};

struct TrainConfig {
  std::string name = "run";  // runs/NAME
  std::string out_dir = "runs";
  std::string device = "cpu";   // cpu | cuda | auto
  int64_t micro_batch = 8;      // B: sequences per micro-batch per rank
  int64_t seq_len = 128;        // T
  int64_t accum = 1;            // A: micro-batches per optimizer step
  int64_t max_steps = 0;        // budget: optimizer steps (0 = no step limit)
  int64_t max_tokens = 0;       // budget: tokens seen (0 = no token limit)
  double max_seconds = 0;       // budget: wall-clock seconds of training (0 = no limit)
  int64_t eval_interval = 100;  // steps between evaluations (0 = only at the end)
  int64_t eval_windows = 64;    // fixed val windows (of seq_len tokens) per evaluation
  int64_t log_interval = 10;    // steps between progress lines
  int64_t save_interval = 0;    // steps between weight saves (0 = only at the end)
  int64_t seed = 1337;
  int64_t threads = 0;      // 0: cores on this node / ranks on this node
  bool overwrite = false;   // allow reusing an existing runs/NAME (else refuse)
  bool tensorboard = true;  // also write the metrics as TensorBoard events (tensorboard.h)
  // Refuse to start a run whose predicted memory does not fit this host (memory_admission.h).
  bool memory_check = true;
  // The gradient noise scale B_simple (train/step/gns.h), logged per step: off by default; its
  // two estimates are smoothed by EMAs of decay gns_ema.
  bool gns = false;
  double gns_ema = 0.95;
  // Measure on every gns_interval-th step only: under accumulation each measured step makes one
  // pass over the gradients per micro-batch, which small micro-batches feel; between
  // measurements the step trains exactly as with gns off.
  int64_t gns_interval = 1;
  // Frozen tensors: comma-separated globs over parameter names (or their Hugging Face names);
  // they get no gradient, master copy or optimizer state (param_table_freeze).
  std::string freeze;
  void validate() const;
};

struct PrecisionConfig {
  std::string params = "fp32";      // compute copy dtype: fp32 | bf16 | fp16
  std::string grads = "fp32";       // gradient dtype
  std::string grad_accum = "auto";  // auto (fp32 when accum > 1, else grads) | fp32 | bf16 | fp16
  std::string master = "fp32";      // fp32 | none (update the compute copy directly)
  std::string state =
      "fp32";  // optimizer state dtype: fp32 | bf16 (m, v, momentum; 8-bit codes unchanged)
  std::string rounding = "nearest";  // nearest | stochastic (master = none)
  // Inputs of the linear layers' GEMMs: fp32 (exact; bf16 weights are widened) | bf16 (both
  // operands rounded to bf16, fp32 accumulation, bf16 dot-product instructions where available).
  std::string matmul = "fp32";
  // Attention: auto (cuDNN's fused attention on cuda runs with matmul = bf16 when cuDNN loads,
  // else our kernel) | cudnn | own (train/config/attention_choice.h). Runs record the resolved
  // value.
  std::string attention = "auto";
  // Subnormal floats on every CPU thread that computes: flush (FTZ + DAZ: results below the
  // smallest normal become 0 and such inputs read as 0; x86 CPUs take a slow microcode assist on
  // them otherwise) | keep (IEEE gradual underflow). model/base/subnormals.h.
  std::string subnormals = "flush";
  std::string loss_scale =
      "auto";  // auto (dynamic for fp16, none otherwise) | dynamic | static | none
  double init_scale = 65536.0;
  int64_t growth_interval = 2000;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t max_consecutive_skips = 50;  // fp16: stop after this many skipped steps in a row
  void validate() const;
};

struct DistConfig {
  int64_t zero = 0;  // ZeRO stage 0..3 (sharding across data-parallel ranks)
  // ZeRO-3: free a unit's gathered weights after its forward (true) or keep every unit gathered
  // from its forward until the optimizer step (false: less communication, stage-2 memory).
  bool reshard_after_forward = true;
  // Seconds a rank waits at a collective for the others before the job ends, naming the ranks
  // that did not arrive. The timeout in effect is max(timeout_s, 5 x the slowest training step,
  // evaluation or save measured so far: train/comm/comm_watch.h), so slow steps never trip it.
  double timeout_s = 600.0;
  // How device tensors travel between ranks: auto | mpi | nccl (train/comm/comm_select.h). auto
  // takes NCCL on cuda with several ranks when the library loads; nccl insists (an error when it
  // cannot, and the only way to use it with one rank).
  std::string comm = "auto";
  void validate() const;
};

struct CkptConfig {
  int64_t interval = 0;  // steps between full checkpoints (0 = only at the end)
  int64_t keep = 2;      // keep the last K checkpoints
  void validate() const;
};

struct RunConfig {
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
  OptimConfig optim;
  PrecisionConfig precision;
  DistConfig dist;
  CkptConfig ckpt;
  void validate() const;  // every section; model.vocab_size must be resolved first
};

// lora.rank = 0 means no adapters: the run trains every weight. A [lora] section whose other keys
// are set away from their defaults asked for adapters, so it is refused (an Error naming those
// keys) rather than silently turned into full training. Part of RunConfig::validate().
void lora_check_off(const LoraConfig& lora);

// The sizes together: the model's parameters and one micro-batch's activations, estimated in
// floating point, must stay far enough below 2^63 that the planner's and the allocator's int64
// byte counts cannot overflow. Throws Error naming the keys. (Each key's own range is checked by
// its section's validate().)
void run_config_check_sizes(const RunConfig& config);

}  // namespace ledgerlm
