// optimizer_create: picks the optimizer named by optim.name.
#include "optim/optim_factories.h"

#include "model/base/check.h"

namespace ledgerlm {

std::unique_ptr<Optimizer> optimizer_create(const OptimConfig& config) {
  config.validate();
  if (config.name == "sgd") return optimizer_create_sgd(config);
  if (config.name == "adamw") return optimizer_create_adamw(config);
  if (config.name == "lamb") return optimizer_create_lamb(config);
  if (config.name == "lars") return optimizer_create_lars(config);
  if (config.name == "adafactor") return optimizer_create_adafactor(config);
  if (config.name == "adamw8bit") return optimizer_create_adamw8bit(config);
  if (config.name == "lion") return optimizer_create_lion(config);
  if (config.name == "adamw_schedulefree") return optimizer_create_schedulefree(config);
  if (config.name == "ademamix") return optimizer_create_ademamix(config);
  if (config.name == "muon") return optimizer_create_muon(config);
  fail(std::string("optim.name: expected ") + kOptimizerNames + " (got '" + config.name + "')");
}

}  // namespace ledgerlm
