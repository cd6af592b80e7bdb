// The [optim] section: which optimizer, its hyper-parameters, the LR schedule and clipping.
// One key, optim.name, switches the algorithm; nothing else in the trainer changes.
#pragma once

#include <cstdint>
#include <string>

#include "model/base/dtype.h"

namespace ledgerlm {

struct OptimConfig {
  std::string name = "adamw";  // sgd | adamw | lamb | lars | adafactor | adamw8bit
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
  // schedule
  std::string schedule = "cosine";  // constant | cosine | linear (each with warmup and a floor)
  int64_t warmup_steps = 0;
  double min_lr_ratio = 0.1;  // floor = lr * min_lr_ratio
  double grad_clip = 1.0;     // clip by global norm; 0 = off
  // Storage of the state that mirrors the parameters (m, v, momentum; Adafactor's m and vector
  // v): fp32 or bf16 (updated in fp32, rounded to nearest even on store). Set from the
  // precision.state key by the trainer, not an optim.* key. 8-bit AdamW's codes/absmax and
  // fp32 fallback m/v and Adafactor's factored statistics are always their own dtypes.
  DType state_dtype = DType::kF32;

  void validate() const;  // throws Error naming the offending optim.* key
};

}  // namespace ledgerlm
