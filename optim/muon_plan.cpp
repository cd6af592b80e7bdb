// Muon's per-tensor decisions (see muon_plan.h).
#include "optim/muon_plan.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "optim/optim_traits.h"

namespace ledgerlm {

bool muon_orthogonalises(const ParamInfo& p, const OptimConfig& config) {
  // An optimizer that works on whole matrices on owner ranks orthogonalises its primary tensors
  // (Muon: muon_matrix, the 2-D tensors of the matrix group).
  const OptimTraits* t = optim_traits_find(config.name);
  return t != nullptr && t->whole == WholeTensor::kOnOwner && t->primary != nullptr &&
         t->primary(p, config);
}

MuonMatrix muon_matrix_of(const ParamInfo& p) {
  const int split = std::max(p.split, 1);
  return {p.shape[0] / split, p.shape.size() > 1 ? p.shape[1] : 1};
}

double muon_lr_factor(const MuonMatrix& m, const OptimConfig& config) {
  const double r = static_cast<double>(m.rows), c = static_cast<double>(m.cols);
  if (config.muon_adjust_lr == "match_rms_adamw") return 0.2 * std::sqrt(std::max(r, c));
  return std::sqrt(std::max(1.0, r / c));
}

double muon_ns_flops(const ParamInfo& p, const OptimConfig& config) {
  const MuonMatrix m = muon_matrix_of(p);
  const double k = static_cast<double>(std::min(m.rows, m.cols));
  const double big = static_cast<double>(std::max(m.rows, m.cols));
  // Per iteration: the Gram matrix (2 k^2 big), its square (2 k^3), the product with X (2 k^2 big).
  const double per_iteration = 4.0 * k * k * big + 2.0 * k * k * k;
  return per_iteration * static_cast<double>(config.ns_steps) * std::max(p.split, 1);
}

std::vector<int> muon_owners(const ParamTable& table, const OptimConfig& config, int world) {
  std::vector<int> owner(table.params.size(), -1);
  std::vector<size_t> order;
  for (size_t i = 0; i < table.params.size(); ++i)
    if (muon_orthogonalises(table.params[i], config)) order.push_back(i);
  // Largest first; ties in table order (a stable sort), so every rank derives the same owners.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return muon_ns_flops(table.params[a], config) > muon_ns_flops(table.params[b], config);
  });
  std::vector<double> load(static_cast<size_t>(std::max(world, 1)), 0.0);
  for (size_t i : order) {
    const size_t r = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    owner[i] = static_cast<int>(r);
    load[r] += muon_ns_flops(table.params[i], config);
  }
  return owner;
}

MuonWork muon_work_of(const MuonMatrix& m) {
  const int64_t k = std::min(m.rows, m.cols);
  return {m.rows * m.cols, k * k};
}

}  // namespace ledgerlm
