// The fused Backend entry points are exactly the composition their default implementation
// calls (backend.h): on every CPU path and in fp32 and fp64, the CPU backend's one-pass versions
// must equal Backend's reference composition bit for bit (the same elementwise values and the
// same summation order), for sizes that split across threads and chunks and for a row count
// below the thread count.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cpu/cpu_backend.h"
#include "model/base/rng.h"

namespace ledgerlm {
namespace {

using cpu::CpuIsa;

template <class T>
std::vector<T> values(int64_t n, uint64_t seed, double lo, double hi) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = rng_bits(seed, RngStream::kInit, 91, static_cast<uint64_t>(i))[0];
    v[i] = static_cast<T>(lo + (hi - lo) * (bits >> 8) / 16777216.0);
  }
  return v;
}

template <class T>
DType dt() {
  return sizeof(T) == 8 ? DType::kF64 : DType::kF32;
}

template <class T>
Tensor t(std::vector<T>& v) {
  return Tensor(v.data(), dt<T>());
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
void check_add_layernorm(Backend& be, int64_t rows, int64_t c, const std::string& what) {
  std::vector<T> a = values<T>(rows * c, 1, -2, 2), b = values<T>(rows * c, 2, -1, 1);
  std::vector<T> w = values<T>(c, 3, 0.5, 1.5), bias = values<T>(c, 4, -0.2, 0.2);
  std::vector<T> sum[2], out[2], mean[2], rstd[2];
  for (int i = 0; i < 2; ++i) {
    sum[i].resize(rows * c), out[i].resize(rows * c), mean[i].resize(rows), rstd[i].resize(rows);
    if (i == 0)
      be.add_layernorm_forward(t(sum[i]), t(out[i]), t(mean[i]), t(rstd[i]), t(a), t(b), t(w),
                               t(bias), rows, c);
    else
      be.Backend::add_layernorm_forward(t(sum[i]), t(out[i]), t(mean[i]), t(rstd[i]), t(a), t(b),
                                        t(w), t(bias), rows, c);
  }
  EXPECT_TRUE(same_bits(sum[0], sum[1])) << what << " sum";
  EXPECT_TRUE(same_bits(out[0], out[1])) << what << " out";
  EXPECT_TRUE(same_bits(mean[0], mean[1])) << what << " mean";
  EXPECT_TRUE(same_bits(rstd[0], rstd[1])) << what << " rstd";
}

template <class T>
void check_gelu_bias(Backend& be, int64_t rows, int64_t c, const std::string& what) {
  std::vector<T> x = values<T>(rows * c, 5, -4, 4), g = values<T>(rows * c, 6, -1, 1);
  std::vector<T> dx[2], db[2];
  for (int i = 0; i < 2; ++i) {
    dx[i].resize(rows * c), db[i] = values<T>(c, 7, -0.1, 0.1);  // accumulated into
    if (i == 0)
      be.gelu_bias_backward(t(dx[i]), t(db[i]), t(x), t(g), rows, c);
    else
      be.Backend::gelu_bias_backward(t(dx[i]), t(db[i]), t(x), t(g), rows, c);
  }
  EXPECT_TRUE(same_bits(dx[0], dx[1])) << what << " dx";
  EXPECT_TRUE(same_bits(db[0], db[1])) << what << " dbias";
}

TEST(OpsFused, EqualTheirCompositionBitwiseOnEveryPath) {
  for (CpuIsa isa : {CpuIsa::kPortable, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!cpu::cpu_isa_supported(isa)) continue;  // (test_ops_isa reports the skip)
    auto be = cpu::backend_create_cpu_isa(2, isa);
    for (const auto& [rows, c] : {std::pair<int64_t, int64_t>{300, 384}, {1, 100}, {768, 512}}) {
      const std::string what = std::string(cpu::cpu_isa_name(isa)) + " rows " +
                               std::to_string(rows) + " C " + std::to_string(c);
      check_add_layernorm<float>(*be, rows, c, what + " fp32");
      check_add_layernorm<double>(*be, rows, c, what + " fp64");
      check_gelu_bias<float>(*be, rows, c, what + " fp32");
      check_gelu_bias<double>(*be, rows, c, what + " fp64");
    }
  }
}

}  // namespace
}  // namespace ledgerlm
