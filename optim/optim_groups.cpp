// The parameter groups' one rule (see optim_groups.h).
#include "optim/optim_groups.h"

namespace ledgerlm {

std::vector<OptimGroup> optim_groups(const OptimConfig& c) {
  std::vector<OptimGroup> groups(3);
  groups[kGroupMatrix] = {"matrix", 1.0, c.weight_decay};
  groups[kGroupEmbedding] = {"embedding", c.lr_mult_embedding,
                             c.decay_embeddings ? c.weight_decay : 0.0};
  groups[kGroupNoDecay] = {"nodecay", c.lr_mult_nodecay, 0.0};
  return groups;
}

int optim_group_of(const ParamInfo& p, const OptimConfig&) {
  switch (p.kind) {
    case ParamKind::kEmbedding:
      return kGroupEmbedding;
    case ParamKind::kMatrix:
      return kGroupMatrix;
    case ParamKind::kBias:
    case ParamKind::kNormWeight:
      return kGroupNoDecay;
  }
  return kGroupNoDecay;
}

}  // namespace ledgerlm
