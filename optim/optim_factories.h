// Constructors of the individual optimizers, used by optimizer_create (optim_factories.cpp). Each
// optimizer lives in its own file; none of them is part of the public API beyond the
// Optimizer interface.
#pragma once

#include <memory>

#include "optim/optimizer.h"

namespace ledgerlm {

std::unique_ptr<Optimizer> optimizer_create_sgd(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_adamw(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_lamb(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_lars(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_adafactor(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_adamw8bit(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_lion(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_schedulefree(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_ademamix(const OptimConfig& config);
std::unique_ptr<Optimizer> optimizer_create_muon(const OptimConfig& config);

}  // namespace ledgerlm
