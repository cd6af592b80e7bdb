// Steps to a target val loss and the seed median (see study_objective.h).
#include "train/cli/study_objective.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

namespace ledgerlm {

StudyToTarget study_steps_to_target(const std::vector<StudyValPoint>& evals, double target) {
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < evals.size(); ++i) {
    const StudyValPoint& p1 = evals[i];
    if (!(p1.loss <= target)) continue;  // NaN never reaches the target
    if (i == 0) return {p1.step, p1.tokens};
    const StudyValPoint& p0 = evals[i - 1];
    // p0.loss > target >= p1.loss, so the fraction lies in [0, 1) (a non-finite p0.loss, a
    // diverged eval before a recovery, leaves nothing to interpolate: s1).
    if (!std::isfinite(p0.loss)) return {p1.step, p1.tokens};
    const double f = (p0.loss - target) / (p0.loss - p1.loss);
    return {p0.step + (p1.step - p0.step) * f, p0.tokens + (p1.tokens - p0.tokens) * f};
  }
  return {inf, inf};
}

std::vector<StudyValPoint> study_val_curve(const std::string& metrics_path) {
  std::vector<StudyValPoint> out;
  std::ifstream in(metrics_path);
  std::string line;
  while (std::getline(in, line)) {
    // (Keys are looked up with find: operator[] on a const json with a missing key is undefined.)
    const nlohmann::json rec = nlohmann::json::parse(line, nullptr, false);
    if (!rec.is_object()) continue;
    const auto step = rec.find("step"), tokens = rec.find("tokens"), loss = rec.find("val_loss");
    if (step == rec.end() || !step->is_number() || loss == rec.end()) continue;
    StudyValPoint p;
    p.step = step->get<double>();
    p.tokens = tokens != rec.end() && tokens->is_number() ? tokens->get<double>() : 0.0;
    // A non-finite loss is written as null (JSON has no NaN): it reaches no target.
    p.loss = loss->is_number() ? loss->get<double>() : std::numeric_limits<double>::quiet_NaN();
    while (!out.empty() && out.back().step >= p.step) out.pop_back();
    out.push_back(p);
  }
  return out;
}

double study_seed_median(std::vector<double> scores) {
  const double inf = std::numeric_limits<double>::infinity();
  if (scores.empty()) return inf;
  for (double& x : scores)
    if (!std::isfinite(x)) x = inf;
  std::sort(scores.begin(), scores.end());
  const size_t n = scores.size();
  return n % 2 ? scores[n / 2] : (scores[n / 2 - 1] + scores[n / 2]) / 2;
}

}  // namespace ledgerlm
