// The score a study minimises per run. With objective = "val_loss" (the default) it is the run's
// final val loss; with objective = "steps_to_target" it is the run's steps to target_loss, read
// from the val_loss records of its metrics.jsonl (records with "step" and "val_loss"):
//   the first eval (s1, l1) with l1 <= target; if an earlier eval (s0, l0) exists,
//   s = s0 + (s1 - s0) * (l0 - target) / (l0 - l1), else s = s1.
//   Never reached, failed, or no records: +inf.
// Tokens to target are interpolated the same way from the records' "tokens" (steps x global batch
// x seq_len). scripts/study_report.py's tokens_to_target() interpolates the same way, on tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ledgerlm {

// One in-run evaluation: the step it followed, the tokens trained by then, its val loss.
struct StudyValPoint {
  double step = 0;
  double tokens = 0;
  double loss = 0;
};

// Steps and tokens to the target (both +inf when never reached).
struct StudyToTarget {
  double steps = 0;
  double tokens = 0;
};

// The formula above over EVALS in step order.
StudyToTarget study_steps_to_target(const std::vector<StudyValPoint>& evals, double target);

// A setting's score over its seeds, what sweeps widen toward and [finals] select by: the median
// (the mean of the middle two for an even count), a non-finite score counting as +inf. One run
// that spikes and ends high moves a mean of three seeds but not their median; with one or two
// seeds the median is the mean, so studies with one sweep seed select as before. Empty: +inf.
double study_seed_median(std::vector<double> scores);

// The val_loss records of a metrics.jsonl in step order (none when the file is missing). A run
// resumed from a checkpoint may log a step again: the later record replaces the earlier ones from
// that step on.
std::vector<StudyValPoint> study_val_curve(const std::string& metrics_path);

}  // namespace ledgerlm
