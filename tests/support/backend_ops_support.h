// The op harness of the backend tests (tests/backend/) and the CUDA tests (tests/cuda/): which
// backends this build and machine have, inputs drawn from the counter RNG, uploads and downloads
// over a backend's copies, and the per-tensor tolerance check against a reference
// (max|got - ref| <= atol + rtol * max|ref|, the worst element reported: testing::compare_tensor
// of tests/support/test_util.h). The fp64 reference ops are in tests/support/reference_ops.h.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/backends/backend_factory.h"
#include "model/base/rng.h"
#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// Printed by every CUDA case that cannot run here; ctest reports such tests as Skipped
// (SKIP_REGULAR_EXPRESSION in tests/CMakeLists.txt), never as Passed.
inline constexpr const char* kNoCudaDevice = "skipped: no CUDA device";

inline bool cuda_device_present() {
  return backend_names().find("cuda") != std::string::npos && backend_resolve("auto") == "cuda";
}

// fp32 tolerance of the issue: 1e-5 + 1e-4 * max|ref| per tensor.
inline constexpr double kAtol32 = 1e-5, kRtol32 = 1e-4;

// One tensor against its reference: same length, and max|got - ref| <= atol + rtol * max|ref|
// (NaN fails); the message names the tensor and its worst element.
inline void expect_tensor_close(const std::string& what, const std::vector<double>& got,
                                const std::vector<double>& ref, double atol = kAtol32,
                                double rtol = kRtol32) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const CompareResult r =
      compare_tensor(what, got.data(), ref.data(), static_cast<int64_t>(got.size()), atol, rtol);
  EXPECT_TRUE(r.ok) << r.message;
}
inline void expect_tensor_close(const std::string& what, const std::vector<float>& got,
                                const std::vector<float>& ref, double atol = kAtol32,
                                double rtol = kRtol32) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const CompareResult r =
      compare_tensor(what, got.data(), ref.data(), static_cast<int64_t>(got.size()), atol, rtol);
  EXPECT_TRUE(r.ok) << r.message;
}

// n normal values times `scale`: element i of draw `seed` from the counter RNG at `site`. A test
// file that had its own generator passes the site it used, so its inputs are what they were.
inline std::vector<double> random_values(int64_t n, uint64_t seed, double scale = 1.0,
                                         uint64_t site = 91) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    auto w = rng_bits(seed, RngStream::kInit, site, static_cast<uint64_t>(i));
    v[static_cast<size_t>(i)] = scale * rng_normal(w[0], w[1]);
  }
  return v;
}

// A backend plus typed uploads and downloads through its copies (the only way in and out).
class DeviceData {
 public:
  explicit DeviceData(Backend& be) : be_(be) {}

  Buffer f32(const std::vector<double>& v) {
    std::vector<float> f(v.begin(), v.end());
    return raw(f.data(), DType::kF32, static_cast<int64_t>(f.size()));
  }
  Buffer f32(const std::vector<float>& f) {
    return raw(f.data(), DType::kF32, static_cast<int64_t>(f.size()));
  }
  Buffer f64(const std::vector<double>& v) {
    return raw(v.data(), DType::kF64, static_cast<int64_t>(v.size()));
  }
  Buffer bits16(const std::vector<uint16_t>& v, DType t) {
    return raw(v.data(), t, static_cast<int64_t>(v.size()));
  }
  Buffer i32(const std::vector<int32_t>& v) {
    return raw(v.data(), DType::kI32, static_cast<int64_t>(v.size()));
  }
  Buffer zeros(DType t, int64_t n) {
    Buffer b = be_.allocate(MemTag::kOther, static_cast<size_t>(n) * dtype_size(t));
    be_.zero(Tensor(b.data(), t), n);
    return b;
  }
  Buffer raw(const void* src, DType t, int64_t n) {
    Buffer b = be_.allocate(MemTag::kOther, static_cast<size_t>(n) * dtype_size(t));
    be_.copy_from_host(Tensor(b.data(), t), src, n);
    return b;
  }
  // Any float dtype back as doubles.
  std::vector<double> get(const Buffer& b, DType t, int64_t n) {
    std::vector<double> out(static_cast<size_t>(n));
    if (t == DType::kF64) {
      be_.copy_to_host(out.data(), Tensor(b.data(), t), n);
      return out;
    }
    std::vector<float> f(static_cast<size_t>(n));
    if (t == DType::kF32) {
      be_.copy_to_host(f.data(), Tensor(b.data(), t), n);
    } else {
      std::vector<uint16_t> h(static_cast<size_t>(n));
      be_.copy_to_host(h.data(), Tensor(b.data(), t), n);
      for (int64_t i = 0; i < n; ++i)
        f[i] = t == DType::kBF16 ? bf16_to_f32(h[i]) : f16_to_f32(h[i]);
    }
    for (int64_t i = 0; i < n; ++i) out[i] = f[i];
    return out;
  }
  std::vector<double> get32(const Buffer& b, int64_t n) { return get(b, DType::kF32, n); }
  template <class T>
  std::vector<T> raw_get(const Buffer& b, DType t, int64_t n) {
    std::vector<T> out(static_cast<size_t>(n));
    be_.copy_to_host(out.data(), Tensor(b.data(), t), n);
    return out;
  }

 private:
  Backend& be_;
};

inline Tensor T32(const Buffer& b) {
  return Tensor(b.data(), DType::kF32);
}
inline Tensor T(const Buffer& b, DType t) {
  return Tensor(b.data(), t);
}

// Values as fp32 would hold them (the inputs the backend actually sees).
inline std::vector<double> as_f32(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = static_cast<float>(v[i]);
  return out;
}
inline std::vector<double> as_bf16(const std::vector<double>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(f32_to_bf16(static_cast<float>(v[i])));
  return out;
}
inline std::vector<uint16_t> bf16_bits(const std::vector<double>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(static_cast<float>(v[i]));
  return out;
}
inline std::vector<uint16_t> f16_bits(const std::vector<double>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_f16(static_cast<float>(v[i]));
  return out;
}

}  // namespace ledgerlm::testing
