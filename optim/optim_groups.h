// Parameter groups: the hyper-parameters a tensor trains with. One rule, here, decides a tensor's
// group (the placement table stores it per tensor; the optimizers read the group's LR multiplier
// and weight decay from it):
//   matrix     2-D weights of the blocks: LR x 1, weight decay optim.weight_decay
//   embedding  token and position embeddings (and so the tied head): LR x optim.lr_mult_embedding,
//              decayed unless optim.decay_embeddings = false
//   nodecay    biases and layer-norm weights: LR x optim.lr_mult_nodecay, no weight decay
// A frozen tensor (kFrozenGroup) has no group: no gradient is applied to it.
#pragma once

#include <vector>

#include "model/param_table.h"
#include "optim/optim_config.h"

namespace ledgerlm {

constexpr int kFrozenGroup = -1;

enum OptimGroupId : int { kGroupMatrix = 0, kGroupEmbedding = 1, kGroupNoDecay = 2 };

struct OptimGroup {
  const char* name = "";
  double lr_mult = 1.0;
  double weight_decay = 0.0;
};

// The groups of `config`, indexed by OptimGroupId.
std::vector<OptimGroup> optim_groups(const OptimConfig& config);
// The group tensor `p` trains in.
int optim_group_of(const ParamInfo& p, const OptimConfig& config);

}  // namespace ledgerlm
