// Host vectors staged through a backend's copies, for tests written against host memory (the
// fp64 gradient checks) that must run on any backend made by name: up(v) copies v into backend
// memory kept for v and returns that tensor, down(v) copies it back into v. On the CPU backend
// this is a detour; on the guard and cuda backends it is the only way in and out (their memory
// is not host-addressable), so a check passing there has used nothing but the backend's ops.
// Also: the backends a per-backend-name suite is instantiated for (cpu, and cuda in a CUDA
// build), and the fixture that skips the cuda instance where no device is visible.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/backend/backend.h"
#include "model/backends/backend_factory.h"
#include "tests/support/backend_ops_support.h"

namespace ledgerlm::testing {

class HostStaging {
 public:
  explicit HostStaging(Backend& be) : be_(be) {}

  // v's contents in backend memory (one buffer per host vector, reused while v's address and
  // size stay the same).
  template <class V>
  Tensor up(const V& v, DType t) {
    using E = typename V::value_type;
    Buffer& b = slot(v.data(), v.size() * sizeof(E));
    be_.copy_from_host(Tensor(b.data(), t), v.data(), static_cast<int64_t>(v.size()));
    return Tensor(b.data(), t);
  }
  Tensor up(const std::vector<double>& v) { return up(v, DType::kF64); }
  Tensor up(const std::vector<int32_t>& v) { return up(v, DType::kI32); }

  // The backend copy of v (staged by up) back into v.
  void down(std::vector<double>& v) {
    auto it = slots_.find(v.data());
    ASSERT_TRUE(it != slots_.end() && it->second.second == v.size() * sizeof(double))
        << "down() of a vector that was not staged up";
    be_.copy_to_host(v.data(), Tensor(it->second.first.data(), DType::kF64),
                     static_cast<int64_t>(v.size()));
  }

 private:
  Buffer& slot(const void* key, size_t bytes) {
    auto it = slots_.find(key);
    if (it == slots_.end() || it->second.second != bytes) {
      Buffer b = be_.allocate(MemTag::kOther, bytes == 0 ? 1 : bytes);
      it = slots_.insert_or_assign(key, std::make_pair(std::move(b), bytes)).first;
    }
    return it->second.first;
  }

  Backend& be_;
  std::map<const void*, std::pair<Buffer, size_t>> slots_;
};

// cpu (the guard backend in the guard re-run: backend_create("cpu") with
// LEDGERLM_TEST_GUARD_BACKEND=1), and cuda where the build has it.
inline std::vector<std::string> cpu_and_cuda_backends() {
  std::vector<std::string> names{"cpu"};
  if (backend_names().find("cuda") != std::string::npos) names.push_back("cuda");
  return names;
}

inline std::string backend_param_name(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

// A suite run on the backend its parameter names; the cuda instance skips without a device.
class OnNamedBackend : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "cuda" && !cuda_device_present()) GTEST_SKIP() << kNoCudaDevice;
    be = backend_create(GetParam(), BackendOptions{2, 0});
    stage = std::make_unique<HostStaging>(*be);
  }
  std::unique_ptr<Backend> be;
  std::unique_ptr<HostStaging> stage;
};

}  // namespace ledgerlm::testing
