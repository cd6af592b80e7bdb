// What Muon does with each tensor, decided from the parameter table alone so that the optimizer,
// the placement table (owners) and the memory planner (its buffers) agree:
//   - the blocks' 2-D weights (group matrix) are orthogonalised; every other trained tensor
//     (embeddings and so the tied head, biases, norm weights) steps with AdamW;
//   - a tensor of `split` stacked matrices (the fused q, k, v projection: three (C, C)) is
//     orthogonalised matrix by matrix, as separate q, k and v weights would be: the fusion is an
//     implementation detail, and one (3C, C) orthogonalisation would couple the three maps'
//     singular values and change the shape factor;
//   - each matrix tensor's Newton–Schulz runs on one owner rank; owners are assigned greedily by
//     Newton–Schulz FLOPs (largest first, to the least-loaded rank), the same on every rank.
#pragma once

#include <cstdint>
#include <vector>

#include "model/param_table.h"
#include "optim/optim_config.h"

namespace ledgerlm {

// True when optimizer `config` orthogonalises tensor `p`: an optimizer whose traits say
// WholeTensor::kOnOwner, on its primary tensors (Muon: the 2-D tensors of the matrix group).
bool muon_orthogonalises(const ParamInfo& p, const OptimConfig& config);

// One matrix of a tensor: its rows (out) and columns (in) in ledgerlm's (out, in) storage.
struct MuonMatrix {
  int64_t rows = 0, cols = 0;
};
MuonMatrix muon_matrix_of(const ParamInfo& p);

// The LR factor of a (rows, cols) matrix: original sqrt(max(1, rows/cols)) (Jordan et al.'s),
// match_rms_adamw 0.2*sqrt(max(rows, cols)) (Moonshot's, for AdamW's update RMS).
double muon_lr_factor(const MuonMatrix& m, const OptimConfig& config);

// Newton–Schulz FLOPs of one tensor (all its matrices), ns_steps iterations.
double muon_ns_flops(const ParamInfo& p, const OptimConfig& config);

// Owner rank of every row of `table` for `world` ranks: the orthogonalised tensors balanced by
// Newton–Schulz FLOPs; -1 for the others.
std::vector<int> muon_owners(const ParamTable& table, const OptimConfig& config, int world);

// Elements of the Newton–Schulz work buffers for the largest matrix an owner handles: the
// iterate's partner (rows*cols) and the two Gram-sized products (min(rows, cols)^2 each).
struct MuonWork {
  int64_t iterate = 0, gram = 0;
};
MuonWork muon_work_of(const MuonMatrix& m);

}  // namespace ledgerlm
