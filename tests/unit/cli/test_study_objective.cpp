// Steps to a target val loss (train/cli/study_objective.h): the interpolation between the last
// eval above the target and the first at or below it, with exact hand-computed figures; a target
// met at the first eval, never met, or a diverged eval; and the val curve read from a
// metrics.jsonl (other records ignored, a resumed run's repeated steps replaced).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "tests/support/test_util.h"
#include "train/cli/study_objective.h"

namespace ledgerlm {
namespace {

// step, tokens (128 a step), loss. The figures are exact in binary (halves and quarters), so the
// expected values are compared exactly.
const std::vector<StudyValPoint> kCurve = {
    {0, 0, 5.5}, {10, 1280, 4.0}, {20, 2560, 3.0}, {30, 3840, 2.5}};

TEST(StudyStepsToTarget, InterpolatesBetweenTheEvalsAroundTheTarget) {
  // 3.5 between (10, 4.0) and (20, 3.0): 10 + 10 x (4.0 - 3.5) / (4.0 - 3.0) = 15 steps.
  StudyToTarget t = study_steps_to_target(kCurve, 3.5);
  EXPECT_EQ(t.steps, 15.0);
  EXPECT_EQ(t.tokens, 1920.0);
  // 2.875 between (20, 3.0) and (30, 2.5): 20 + 10 x 0.125 / 0.5 = 22.5 steps, 2880 tokens.
  t = study_steps_to_target(kCurve, 2.875);
  EXPECT_EQ(t.steps, 22.5);
  EXPECT_EQ(t.tokens, 2880.0);
  // Met exactly at an eval: that eval's step.
  EXPECT_EQ(study_steps_to_target(kCurve, 3.0).steps, 20.0);
  // Met at the first eval (no earlier one to interpolate from): its step.
  t = study_steps_to_target({{4, 512, 2.0}, {8, 1024, 1.0}}, 2.5);
  EXPECT_EQ(t.steps, 4.0);
  EXPECT_EQ(t.tokens, 512.0);
}

TEST(StudyStepsToTarget, NeverReachedIsInfinite) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(study_steps_to_target(kCurve, 2.0).steps, inf);
  EXPECT_EQ(study_steps_to_target(kCurve, 2.0).tokens, inf);
  EXPECT_EQ(study_steps_to_target({}, 2.0).steps, inf);
  // A diverged eval (NaN) reaches nothing; a later recovery counts from its own step.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(study_steps_to_target({{0, 0, 5.0}, {10, 1280, nan}}, 2.0).steps, inf);
  EXPECT_EQ(study_steps_to_target({{0, 0, 5.0}, {10, 1280, nan}, {20, 2560, 1.0}}, 2.0).steps,
            20.0);
}

TEST(StudyValCurve, ReadsTheValRecordsOfAMetricsFile) {
  const std::string dir = testing::make_temp_dir("ledgerlm_study_objective_");
  const std::string path = dir + "/metrics.jsonl";
  // A train record, evals at 0, 10, 20, a resume from step 10 logging 20 again (the later record
  // wins), a non-finite loss written as null, and the summary record (no "step").
  ASSERT_TRUE(testing::write_file(
      path,
      "{\"step\":1,\"tokens\":128,\"loss\":5.9}\n"
      "{\"step\":0,\"tokens\":0,\"val_loss\":5.5}\n"
      "{\"step\":10,\"tokens\":1280,\"val_loss\":4.0}\n"
      "{\"step\":20,\"tokens\":2560,\"val_loss\":3.5}\n"
      "{\"step\":20,\"tokens\":2560,\"val_loss\":3.0}\n"
      "{\"step\":30,\"tokens\":3840,\"val_loss\":null}\n"
      "{\"summary\":true,\"steps\":30,\"final_val_loss\":2.5,\"val_loss\":2.5}\n"));
  const std::vector<StudyValPoint> c = study_val_curve(path);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].step, 0.0);
  EXPECT_EQ(c[2].step, 20.0);
  EXPECT_EQ(c[2].loss, 3.0);
  EXPECT_EQ(c[2].tokens, 2560.0);
  EXPECT_TRUE(std::isnan(c[3].loss));
  EXPECT_EQ(study_steps_to_target(c, 3.5).steps, 15.0);
  EXPECT_TRUE(study_val_curve(dir + "/missing.jsonl").empty());
}

}  // namespace
}  // namespace ledgerlm
