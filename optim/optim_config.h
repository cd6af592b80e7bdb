// The [optim] section: which optimizer, its hyper-parameters, the LR schedule and clipping.
// One key, optim.name, switches the algorithm; nothing else in the trainer changes.
#pragma once

#include <cstdint>
#include <string>

#include "model/base/dtype.h"

namespace ledgerlm {

// Largest optim.sf_weight_lr_power: lr^16 stays a normal double for every LR in [1e-19, 1e19].
inline constexpr double kMaxSfWeightLrPower = 16.0;

struct OptimConfig {
  // One of the registered optimizers (optim_traits.h: sgd, adamw, lamb, lars, adafactor, ...).
  std::string name = "adamw";
  std::string impl = "fused";  // loop | foreach | fused (sgd, adamw); others: fused only
  double lr = 6e-4;            // peak learning rate
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.1;
  bool decay_embeddings = true;    // embeddings are 2-D weights: decayed unless this is false
  double lr_mult_embedding = 1.0;  // per-group LR multipliers
  double lr_mult_nodecay = 1.0;    // biases and norm weights
  // sgd
  double momentum = 0.9;
  bool nesterov = false;
  std::string wd_mode = "decoupled";  // decoupled (w *= 1 - lr*wd) | l2 (g += wd*w)
  // lamb: trust ratio phi(||w||)/||r||, phi = identity or clamp to [trust_lo, trust_hi]
  std::string lamb_phi = "identity";  // identity | clamp
  double trust_lo = 0.0;
  double trust_hi = 10.0;
  // lars
  double lars_eta = 1e-3;
  bool lars_exclude_1d = true;  // 1-D tensors (biases, norms) use local lr 1
  // adafactor
  double adafactor_eps1 = 1e-30;
  double adafactor_eps2 = 1e-3;
  double adafactor_d = 1.0;
  double adafactor_beta1 = 0.0;         // 0: no momentum
  bool adafactor_relative_step = true;  // rho_t = min(1e-2, 1/sqrt(t)); false: schedule's lr
  double adafactor_decay_rate = 0.8;    // beta2_t = 1 - t^(-decay_rate)
  // adamw8bit
  int64_t block_size = 256;  // quantization block (elements); equals the layout block
  bool embedding_fp32_state = false;
  // lion: its own betas (the paper's 0.9, 0.99); LR and weight decay are optim.lr and
  // optim.weight_decay, on Lion's scale (3-10x smaller LR, 3-10x larger decay than AdamW's)
  double lion_beta1 = 0.9;
  double lion_beta2 = 0.99;
  // adamw_schedulefree (betas and eps: optim.beta1, beta2, eps): the x average weights step t by
  // lr_max^power (the authors' weight_lr_power)
  double sf_weight_lr_power = 2.0;  // 0..kMaxSfWeightLrPower
  // ademamix (beta1, beta2, eps shared with adamw): the slow EMA's beta3 and mixing alpha, both
  // warmed up over ademamix_warmup steps (0: the run's length in steps)
  double ademamix_beta3 = 0.9999;
  double ademamix_alpha = 5.0;
  int64_t ademamix_warmup = 0;
  // muon: momentum and Newton–Schulz for the blocks' 2-D weights, AdamW (beta1, beta2, eps) at
  // muon_adamw_lr for the embeddings (and tied head), biases and norm weights
  double muon_momentum = 0.95;
  bool muon_nesterov = true;
  int64_t ns_steps = 5;
  double ns_eps = 1e-7;
  std::string muon_adjust_lr = "original";  // original: sqrt(max(1, out/in)); match_rms_adamw
  double muon_adamw_lr = 6e-4;              // peak LR of the AdamW group (scheduled like optim.lr)
  // schedule
  std::string schedule = "cosine";  // constant | cosine | linear (each with warmup and a floor)
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.1;  // floor = lr * min_lr_ratio
  double grad_clip = 1.0;     // clip by global norm; 0 = off
  // Where the fp32 master and the optimizer state live: none (with the weights), host (pinned
  // host memory, the step on the CPU: device backends), disk (files under offload_dir, streamed
  // through offload_staging_mb of RAM). Results are bit-identical across the three.
  std::string offload = "none";
  std::string offload_dir;  // "": RUN_DIR/offload
  // The staging arena in MiB (raised to what whole-tensor kernels need).
  double offload_staging_mb = 64;
  // Weight averaging: the half-life in tokens of an exponential moving average of the master
  // weights that evaluation and the run's weights use (weight_average.cpp); 0: off.
  double ema_half_life = 0.0;
  // Its decay per optimizer step, 0.5^(tokens per step / ema_half_life) (optim_ema_decay): set by
  // the trainer, which knows the global batch, not an optim.* key.
  double ema_decay = 0.0;
  // Storage of the state that mirrors the parameters (m, v, momentum; Adafactor's m and vector
  // v): fp32 or bf16 (updated in fp32, rounded to nearest even on store). Set from the
  // precision.state key by the trainer, not an optim.* key. 8-bit AdamW's codes/absmax and
  // fp32 fallback m/v and Adafactor's factored statistics are always their own dtypes.
  DType state_dtype = DType::kF32;

  void validate() const;  // throws Error naming the offending optim.* key (optim_validate.cpp)
};

// True for an optimizer whose training weights differ from the weights it keeps as its result
// (Schedule-Free AdamW trains at y, keeps x): the fp32 master then exists apart from the compute
// copy even with fp32 params, and precision.master = none is refused. From the optimizer's traits.
bool optim_trains_off_master(const OptimConfig& c);

// The decay per step of an average with a half-life of `half_life_tokens` tokens at
// `tokens_per_step` tokens a step: 0.5^(tokens_per_step / half_life_tokens); 0 when either is 0.
double optim_ema_decay(double half_life_tokens, int64_t tokens_per_step);

}  // namespace ledgerlm
