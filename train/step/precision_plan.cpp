// precision_plan (see precision_plan.h).
#include "train/step/precision_plan.h"

#include "model/base/check.h"

namespace ledgerlm {

PrecisionPlan precision_plan(const RunConfig& c) {
  const PrecisionConfig& p = c.precision;
  PrecisionPlan plan;
  plan.params = dtype_parse(p.params, "precision.params");
  DType grads = dtype_parse(p.grads, "precision.grads");
  if (p.grad_accum == "auto") {
    plan.grads = c.train.accum > 1 ? DType::kF32 : grads;
  } else {
    plan.grads = c.train.accum > 1 ? dtype_parse(p.grad_accum, "precision.grad_accum") : grads;
  }
  plan.master_none = p.master == "none";
  const bool off_master = optim_trains_off_master(c.optim);
  LLM_REQUIRE(!(plan.master_none && off_master),
              "precision.master = none: optim.name = ", c.optim.name,
              " keeps its result x in the fp32 master apart from the weights it trains at; set "
              "precision.master = fp32");
  LLM_REQUIRE(!(plan.master_none && c.optim.offload != "none"),
              "precision.master = none: optim.offload = ", c.optim.offload,
              " moves the fp32 master off the compute device, so it needs one; set "
              "precision.master = fp32");
  const bool averaged = c.optim.ema_half_life > 0.0;
  LLM_REQUIRE(!(plan.master_none && averaged),
              "precision.master = none: optim.ema_half_life = ", c.optim.ema_half_life,
              " averages the fp32 master weights, so it needs them; set precision.master = fp32");
  // An optimizer that trains off its master needs both copies, even with fp32 params; so does
  // offload (the master moves off the device, the weights the model uses stay), and so does a
  // weight average (evaluation puts the average where the weights are, the master stays).
  plan.separate_master = !plan.master_none && (plan.params != DType::kF32 || off_master ||
                                               averaged || c.optim.offload != "none");
  LLM_REQUIRE(!(plan.master_none && plan.params == DType::kF32),
              "precision.master = none needs precision.params bf16 or fp16 (fp32 params are "
              "their own master)");
  plan.rounding = p.rounding == "stochastic" ? Rounding::kStochastic : Rounding::kNearest;
  std::string mode = p.loss_scale;
  if (mode == "auto")
    mode = plan.params == DType::kF16 || plan.grads == DType::kF16 ? "dynamic" : "none";
  plan.scaler_on = mode != "none";
  plan.scaler_dynamic = mode == "dynamic";
  return plan;
}

}  // namespace ledgerlm
