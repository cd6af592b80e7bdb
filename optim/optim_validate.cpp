// Validation of the [optim] section: every bad value is reported with the optim.* key it came from.
// Apart from optim_config.h because it reads the traits table (optim_traits.h), which reads that
// header.
#include "optim/optim_config.h"

#include <cmath>

#include "model/base/check.h"
#include "optim/optim_traits.h"

namespace ledgerlm {
namespace {

bool one_of(const std::string& v, std::initializer_list<const char*> options) {
  for (const char* o : options)
    if (v == o) return true;
  return false;
}

void require_beta(double beta, const char* key) {
  LLM_REQUIRE(std::isfinite(beta) && beta >= 0.0 && beta < 1.0, key, ": expected in [0, 1) (got ",
              beta, ")");
}

void require_nonneg(double x, const char* key) {
  LLM_REQUIRE(std::isfinite(x) && x >= 0.0, key, ": expected a finite value >= 0 (got ", x, ")");
}

}  // namespace

bool optim_trains_off_master(const OptimConfig& c) {
  const OptimTraits* t = optim_traits_find(c.name);
  return t != nullptr && t->trains_off_master;
}

void OptimConfig::validate() const {
  const OptimTraits& traits = optim_traits_of(*this);  // names every optimizer otherwise
  LLM_REQUIRE(one_of(impl, {"loop", "foreach", "fused"}),
              "optim.impl: expected loop, foreach or fused (got '", impl, "')");
  LLM_REQUIRE(impl == "fused" || traits.schedules, "optim.impl: '", impl, "' exists for ",
              optim_names_text_if([](const OptimTraits& t) { return t.schedules; }, ", ", " and "),
              " only; optim.name=", name, " needs fused");
  LLM_REQUIRE(one_of(schedule, {"constant", "cosine", "linear"}),
              "optim.schedule: expected constant, cosine or linear (got '", schedule, "')");
  LLM_REQUIRE(one_of(wd_mode, {"decoupled", "l2"}),
              "optim.wd_mode: expected decoupled or l2 (got '", wd_mode, "')");
  LLM_REQUIRE(one_of(lamb_phi, {"identity", "clamp"}),
              "optim.lamb_phi: expected identity or clamp (got '", lamb_phi, "')");
  require_nonneg(lr, "optim.lr");
  require_beta(beta1, "optim.beta1");
  require_beta(beta2, "optim.beta2");
  LLM_REQUIRE(std::isfinite(eps) && eps > 0.0, "optim.eps: expected > 0 (got ", eps, ")");
  require_nonneg(weight_decay, "optim.weight_decay");
  require_nonneg(lr_mult_embedding, "optim.lr_mult_embedding");
  require_nonneg(lr_mult_nodecay, "optim.lr_mult_nodecay");
  require_beta(momentum, "optim.momentum");
  LLM_REQUIRE(!nesterov || momentum > 0.0, "optim.nesterov: needs optim.momentum > 0");
  require_nonneg(trust_lo, "optim.trust_lo");
  LLM_REQUIRE(std::isfinite(trust_hi) && trust_hi >= trust_lo,
              "optim.trust_hi: expected >= optim.trust_lo=", trust_lo, " (got ", trust_hi, ")");
  LLM_REQUIRE(std::isfinite(lars_eta) && lars_eta > 0.0, "optim.lars_eta: expected > 0 (got ",
              lars_eta, ")");
  LLM_REQUIRE(std::isfinite(adafactor_eps1) && adafactor_eps1 > 0.0,
              "optim.adafactor_eps1: expected > 0 (got ", adafactor_eps1, ")");
  require_nonneg(adafactor_eps2, "optim.adafactor_eps2");
  LLM_REQUIRE(std::isfinite(adafactor_d) && adafactor_d > 0.0,
              "optim.adafactor_d: expected > 0 (got ", adafactor_d, ")");
  require_beta(adafactor_beta1, "optim.adafactor_beta1");
  LLM_REQUIRE(std::isfinite(adafactor_decay_rate) && adafactor_decay_rate > 0.0 &&
                  adafactor_decay_rate <= 1.0,
              "optim.adafactor_decay_rate: expected in (0, 1] (got ", adafactor_decay_rate, ")");
  LLM_REQUIRE(block_size > 0 && (block_size & (block_size - 1)) == 0,
              "optim.block_size: expected a positive power of two (got ", block_size, ")");
  LLM_REQUIRE(warmup_steps >= 0, "optim.warmup_steps: expected >= 0 (got ", warmup_steps, ")");
  LLM_REQUIRE(std::isfinite(min_lr_ratio) && min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0,
              "optim.min_lr_ratio: expected in [0, 1] (got ", min_lr_ratio, ")");
  require_nonneg(grad_clip, "optim.grad_clip");
  LLM_REQUIRE(one_of(offload, {"none", "host", "disk"}),
              "optim.offload: expected none, host or disk (got '", offload, "')");
  LLM_REQUIRE(std::isfinite(offload_staging_mb) && offload_staging_mb >= 0.0625 &&
                  offload_staging_mb <= 1048576.0,
              "optim.offload_staging_mb: expected 0.0625..1048576 MiB (got ", offload_staging_mb,
              ")");
  require_beta(lion_beta1, "optim.lion_beta1");
  require_beta(lion_beta2, "optim.lion_beta2");
  // The average weights step t by lr_max^power (the authors use 2; 0 is a plain average). Past
  // 16 the weight of any LR below 1e-19 underflows double (and past 1e19 overflows), so the
  // average's coefficient becomes 0/0 or 0 and x silently stops moving; 16 already gives the
  // post-warmup iterates all the weight, so nothing useful lies above it.
  LLM_REQUIRE(std::isfinite(sf_weight_lr_power) && sf_weight_lr_power >= 0.0 &&
                  sf_weight_lr_power <= kMaxSfWeightLrPower,
              "optim.sf_weight_lr_power: expected in [0, ", kMaxSfWeightLrPower,
              "] (the averaging weight lr_max^power; the authors use 2, and past ",
              kMaxSfWeightLrPower, " the weights underflow and the average stops moving) (got ",
              sf_weight_lr_power, ")");
  require_beta(ademamix_beta3, "optim.ademamix_beta3");
  require_nonneg(ademamix_alpha, "optim.ademamix_alpha");
  LLM_REQUIRE(ademamix_warmup >= 0,
              "optim.ademamix_warmup: expected >= 0 (0: the run's length; got ", ademamix_warmup,
              ")");
  require_beta(muon_momentum, "optim.muon_momentum");
  LLM_REQUIRE(ns_steps >= 1 && ns_steps <= 100, "optim.ns_steps: expected 1..100 (got ", ns_steps,
              ")");
  LLM_REQUIRE(std::isfinite(ns_eps) && ns_eps > 0.0, "optim.ns_eps: expected > 0 (got ", ns_eps,
              ")");
  LLM_REQUIRE(one_of(muon_adjust_lr, {"original", "match_rms_adamw"}),
              "optim.muon_adjust_lr: expected original or match_rms_adamw (got '", muon_adjust_lr,
              "')");
  require_nonneg(muon_adamw_lr, "optim.muon_adamw_lr");
  require_nonneg(ema_half_life, "optim.ema_half_life");
  LLM_REQUIRE(ema_half_life == 0.0 || !traits.trains_off_master,
              "optim.ema_half_life = ", ema_half_life, ": optim.name = ", name,
              " already returns an average of its iterates; set optim.ema_half_life = 0");
  LLM_REQUIRE(ema_half_life == 0.0 || offload == "none", "optim.ema_half_life = ", ema_half_life,
              ": the weight average is not available with optim.offload = ", offload,
              "; set optim.offload = none or optim.ema_half_life = 0");
  LLM_REQUIRE(state_dtype == DType::kF32 || state_dtype == DType::kBF16,
              "precision.state: expected fp32 or bf16 (got ", dtype_name(state_dtype), ")");
  if (traits.validate != nullptr) traits.validate(*this);  // the optimizer's own keys
}

}  // namespace ledgerlm
