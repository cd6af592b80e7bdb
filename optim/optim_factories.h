// What the traits table (optim_traits.cpp) takes from the individual optimizers' files: their
// constructors and their own rules (which tensors a state covers, config checks, advice). Each
// optimizer lives in its own file; none of them is part of the public API beyond the Optimizer
// interface and its traits.
#pragma once

#include <memory>
#include <string>
#include <vector>

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
// optim.ema_half_life: `inner` with an average of the master weights beside it
// (weight_average.cpp).
std::unique_ptr<Optimizer> optimizer_wrap_weight_average(std::unique_ptr<Optimizer> inner,
                                                         const OptimConfig& config);

// Muon orthogonalises a 2-D tensor of the matrix group (muon_plan.h: muon_orthogonalises).
bool muon_matrix(const ParamInfo& p, const OptimConfig& config);
// Adafactor factors a tensor's second moment (row and column statistics) when it has >= 2 dims.
bool adafactor_factors(const ParamInfo& p, const OptimConfig& config);
// 8-bit AdamW quantizes m and v of a tensor of kSmallTensor+ elements (not of an embedding with
// optim.embedding_fp32_state); the others keep fp32 m and v.
bool adamw8bit_quantizes(const ParamInfo& p, const OptimConfig& config);
// Config checks of the optimizer's own keys (OptimTraits::validate).
void schedulefree_validate(const OptimConfig& config);
void ademamix_validate(const OptimConfig& config);
// Advice at the start of a run (OptimTraits::notes).
std::vector<std::string> lion_notes(const OptimConfig& config);
std::vector<std::string> ademamix_notes(const OptimConfig& config);

}  // namespace ledgerlm
