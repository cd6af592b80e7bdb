// Buffers that know where they live and the backend's explicit copies: host buffers, backend
// buffers and a stand-in device allocator; copy_from_host / copy_to_host / copy for every dtype
// the trainer moves (bitwise: a copy reorders nothing), partial ranges, size and dtype checks;
// the backend factory by name.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "model/backend/backend.h"
#include "model/backends/backend_factory.h"
#include "model/base/check.h"
#include "model/base/memory.h"
#include "model/base/rng.h"

namespace ledgerlm {
namespace {

// Host memory that claims to be a device's, counting calls: Buffer must route allocation and
// release through it and report its space.
class CountingDeviceAllocator final : public Allocator {
 public:
  MemSpace space() const override { return MemSpace::kDevice; }
  void* allocate(size_t bytes) override {
    ++allocations;
    return host_allocator().allocate(bytes);
  }
  void deallocate(void* data, size_t bytes) override {
    ++releases;
    host_allocator().deallocate(data, bytes);
  }
  int allocations = 0, releases = 0;
};

TEST(OpsMemory, BuffersKnowWhereTheyLive) {
  MemoryTracker tracker;
  CountingDeviceAllocator device;
  {
    Buffer host(&tracker, MemTag::kData, 100);
    Buffer dev(&device, &tracker, MemTag::kParams, 4096);
    EXPECT_EQ(host.space(), MemSpace::kHost);
    EXPECT_EQ(dev.space(), MemSpace::kDevice);
    EXPECT_EQ(device.allocations, 1);
    EXPECT_EQ(tracker.usage(MemTag::kParams).current, 4096);
    Buffer moved = std::move(dev);  // ownership moves, the allocator with it
    EXPECT_EQ(moved.space(), MemSpace::kDevice);
    EXPECT_TRUE(dev.empty());
  }
  EXPECT_EQ(device.releases, 1);
  EXPECT_EQ(tracker.total().current, 0);
  EXPECT_STREQ(mem_space_name(MemSpace::kDevice), "device");
}

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i += 16) {
    auto w = rng_bits(seed, RngStream::kInit, 5, i);
    std::memcpy(v.data() + i, w.data(), std::min<size_t>(16, n - i));
  }
  return v;
}

// host -> backend -> backend -> host round trips, whole and partial, for each dtype; sizes above
// one internal chunk so the parallel pieces are exercised.
TEST(OpsMemory, CopiesAcrossBufferKindsAreExact) {
  auto be = backend_create("cpu", BackendOptions{2, 0});
  EXPECT_EQ(be->memory_space(), MemSpace::kHost);
  for (DType dt : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64, DType::kI32, DType::kU8}) {
    const int64_t n = 300007;
    const size_t es = dtype_size(dt);
    const std::vector<uint8_t> src = random_bytes(n * es, 17);
    Buffer a = be->allocate(MemTag::kWorkspace, n * es),
           b = be->allocate(MemTag::kWorkspace, n * es);
    be->copy_from_host(Tensor(a.data(), dt), src.data(), n);
    be->copy(Tensor(b.data(), dt), Tensor(a.data(), dt), n);
    std::vector<uint8_t> back(n * es, 0);
    be->copy_to_host(back.data(), Tensor(b.data(), dt), n);
    EXPECT_EQ(back, src) << dtype_name(dt);
    // A partial range lands where it is pointed and nowhere else.
    std::vector<uint8_t> part(100 * es, 0);
    be->copy_to_host(part.data(), Tensor(b.data(), dt).offset(1234), 100);
    EXPECT_EQ(std::memcmp(part.data(), src.data() + 1234 * es, 100 * es), 0) << dtype_name(dt);
  }
  std::vector<float> f(4, 1.0f);
  std::vector<uint16_t> h(4);
  EXPECT_THROW(be->copy(Tensor(h.data(), DType::kBF16), Tensor(f.data(), DType::kF32), 4), Error)
      << "a copy never converts";
  be->copy(Tensor(h.data(), DType::kBF16), Tensor(f.data(), DType::kBF16), 0);  // n = 0: no-op
}

TEST(OpsMemory, FactoryByName) {
  auto be = backend_create("cpu", BackendOptions{1, 0});
  EXPECT_EQ(be->name(), "cpu");
  EXPECT_EQ(be->num_threads(), 1);
  try {
    backend_create("tpu");
    FAIL() << "an unknown backend must be refused";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'tpu'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(backend_names()), std::string::npos) << msg;
  }
}

// The guard backend is only proof of anything if host access to its memory really faults: copies
// through the backend work, a direct read of a backend buffer outside a backend call dies.
TEST(OpsMemory, GuardBackendMemoryFaultsOutsideItsCalls) {
  auto be = backend_create("guard", BackendOptions{1, 0});
  EXPECT_EQ(be->name(), "guard");
  EXPECT_EQ(be->memory_space(), MemSpace::kDevice);
  const std::vector<float> src = {1.5f, -2.0f, 3.25f, 7.0f};
  Buffer buf = be->allocate(MemTag::kWorkspace, src.size() * sizeof(float));
  be->copy_from_host(Tensor(buf.data(), DType::kF32), src.data(), 4);
  std::vector<float> back(4, 0.0f);
  be->copy_to_host(back.data(), Tensor(buf.data(), DType::kF32), 4);
  EXPECT_EQ(back, src);
  const auto* raw = static_cast<const volatile float*>(buf.data());
  EXPECT_DEATH({ std::printf("%f\n", static_cast<double>(raw[0])); }, "")
      << "reading guard memory from the host must fault";
  EXPECT_EQ(be->transfers().up_bytes, 16);
  EXPECT_EQ(be->transfers().down_bytes, 16);
}

}  // namespace
}  // namespace ledgerlm
