// SubnormalCountBackend (model/backend/wrap/subnormal_count_backend.h): it counts the subnormals
// of a GEMM's inputs and output by bit pattern, so the counts are right whether the counting
// thread flushes or not, and LEDGERLM_TEST_COUNT_SUBNORMALS=1 puts it around a backend made by
// name.
#include <gtest/gtest.h>

#include <cstdlib>
#include <limits>
#include <memory>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/wrap/subnormal_count_backend.h"
#include "model/backends/backend_factory.h"
#include "model/base/subnormals.h"

namespace ledgerlm {
namespace {

// C[4,3] = A[4,2] B[2,3], B all ones; A rows [t, 0], [t, t], [1, 0], [0, 0] with t subnormal:
// A holds 3 subnormals; C's first two rows are t and 2t (subnormal) when subnormals are kept and
// 0 when flushed.
SubnormalCount gemm_counts(bool flush, SubnormalCount* a_count) {
  subnormals_set_process(flush);
  SubnormalCountBackend be(backend_create_cpu(2));
  const float t = std::numeric_limits<float>::denorm_min() * 5.0f;
  const std::vector<float> a = {t, 0, t, t, 1, 0, 0, 0}, b(6, 1.0f);
  Buffer ba = be.allocate(MemTag::kWorkspace, a.size() * sizeof(float));
  Buffer bb = be.allocate(MemTag::kWorkspace, b.size() * sizeof(float));
  Buffer bc = be.allocate(MemTag::kWorkspace, 12 * sizeof(float));
  be.copy_from_host(Tensor(ba.data(), DType::kF32), a.data(), 8);
  be.copy_from_host(Tensor(bb.data(), DType::kF32), b.data(), 6);
  GemmArgs g;
  g.a = Tensor(ba.data(), DType::kF32);
  g.b = Tensor(bb.data(), DType::kF32);
  g.c = Tensor(bc.data(), DType::kF32);
  g.m = 4;
  g.n = 3;
  g.k = 2;
  be.gemm(g);
  *a_count = be.counts().at("gemm.a");
  EXPECT_EQ(be.counts().at("gemm.b").subnormal, 0);
  return be.counts().at("gemm.c");
}

TEST(SubnormalCountBackend, CountsGemmOperandsByBitsOnEitherSetting) {
  SubnormalCount a;
  const SubnormalCount keep = gemm_counts(false, &a);
  EXPECT_EQ(a.subnormal, 3);
  EXPECT_EQ(a.total, 8);
  EXPECT_EQ(keep.subnormal, 6);
  EXPECT_EQ(keep.total, 12);
  // Flushing: the stored inputs are still subnormal (counted on a thread with DAZ on), the
  // products are 0.
  const SubnormalCount flush = gemm_counts(true, &a);
  EXPECT_EQ(a.subnormal, 3);
  EXPECT_EQ(flush.subnormal, 0);
  subnormals_set_process(true);
}

TEST(SubnormalCountBackend, EnvironmentHookWrapsBackendsMadeByName) {
  ::setenv("LEDGERLM_TEST_COUNT_SUBNORMALS", "1", 1);
  std::unique_ptr<Backend> be = backend_create("cpu", {1, 0});
  ::unsetenv("LEDGERLM_TEST_COUNT_SUBNORMALS");
  EXPECT_NE(dynamic_cast<SubnormalCountBackend*>(be.get()), nullptr);
  EXPECT_EQ(dynamic_cast<SubnormalCountBackend*>(backend_create("cpu", {1, 0}).get()), nullptr);
}

}  // namespace
}  // namespace ledgerlm
