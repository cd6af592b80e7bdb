// CUDA test of the NCCL Comm (train/comm/comm_nccl.cpp) with one rank (dist.comm = nccl is the
// only way to run it with one; NCCL refuses two ranks on one GPU, so several ranks are not
// tested here): initialisation over the single Comm, every device-tensor collective on device
// buffers against the expected values (with one rank: the identity, a sum of one term), the
// all-to-all with an odd count and with nothing to send, the async start + wait path with
// backend work queued before and after, host-memory tensors handed to the wrapped Comm, and the
// refusals. Skips without a device.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "model/backend/backend.h"
#include "model/backend/cuda/cuda_device.h"
#include "model/backends/backend_factory.h"
#include "model/base/memory.h"
#include "train/comm/comm_select.h"

namespace ledgerlm {
namespace {

// Values that are exact in every dtype used (small integers and halves): a collective that
// moved or summed them wrongly cannot match by rounding.
std::vector<float> pattern(size_t n, float offset) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = offset + 0.5f * static_cast<float>(i % 97);
  return v;
}

class NcclOneRank : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
    host_ = comm_create_single();
    be_ = backend_create("cuda");
    std::string why;
    comm_ = comm_create_nccl(*host_, *be_, &why);
    ASSERT_NE(comm_, nullptr) << why;
    ASSERT_EQ(comm_->name(), "nccl");
    ASSERT_EQ(comm_->world(), 1);
  }

  template <class T>
  Buffer upload(const std::vector<T>& v, DType dt) {
    Buffer b = be_->allocate(MemTag::kWorkspace, v.size() * sizeof(T));
    be_->copy_from_host(Tensor(b.data(), dt), v.data(), static_cast<int64_t>(v.size()));
    return b;
  }
  template <class T>
  std::vector<T> download(const Buffer& b, size_t n, DType dt) {
    std::vector<T> v(n);
    be_->copy_to_host(v.data(), Tensor(b.data(), dt), static_cast<int64_t>(n));
    return v;
  }

  std::unique_ptr<Comm> host_;
  std::unique_ptr<Backend> be_;
  std::unique_ptr<Comm> comm_;
};

// A sum over one rank is the rank's own value: bitwise (NCCL adds nothing to it).
TEST_F(NcclOneRank, AllReduceAndReduceScatterSumFp32AndFp64) {
  const size_t n = 1001;
  const std::vector<float> f = pattern(n, -3.0f);
  Buffer bf = upload(f, DType::kF32);
  comm_->all_reduce_sum(*be_, Tensor(bf.data(), DType::kF32), static_cast<int64_t>(n));
  EXPECT_EQ(download<float>(bf, n, DType::kF32), f);
  comm_->reduce_scatter_sum(*be_, Tensor(bf.data(), DType::kF32), static_cast<int64_t>(n));
  EXPECT_EQ(download<float>(bf, n, DType::kF32), f);

  std::vector<double> d(n);
  for (size_t i = 0; i < n; ++i) d[i] = 1e10 + static_cast<double>(i) * 0.25;
  Buffer bd = upload(d, DType::kF64);
  comm_->all_reduce_sum(*be_, Tensor(bd.data(), DType::kF64), static_cast<int64_t>(n));
  EXPECT_EQ(download<double>(bd, n, DType::kF64), d);
  comm_->reduce_scatter_sum(*be_, Tensor(bd.data(), DType::kF64), static_cast<int64_t>(n));
  EXPECT_EQ(download<double>(bd, n, DType::kF64), d);
}

TEST_F(NcclOneRank, AllGatherMovesAnyDtypeAsBytes) {
  const size_t n = 333;  // odd byte counts for bf16 pieces
  std::vector<uint16_t> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = static_cast<uint16_t>(0x3f80 + i);
  Buffer b = upload(h, DType::kBF16);
  comm_->all_gather_in_place(*be_, Tensor(b.data(), DType::kBF16), static_cast<int64_t>(n));
  EXPECT_EQ(download<uint16_t>(b, n, DType::kBF16), h);
}

// One rank sends its one block to itself: recv = send, and nothing past the block is written.
TEST_F(NcclOneRank, AllToAllVSendsTheBlockToItself) {
  const size_t n = 37, room = 50;
  std::vector<int32_t> s(n), sentinel(room, -7);
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<int32_t>(1000 + 3 * i);
  Buffer bs = upload(s, DType::kI32), br = upload(sentinel, DType::kI32);
  comm_->all_to_all_v(*be_, Tensor(bs.data(), DType::kI32), {static_cast<int64_t>(n)},
                      Tensor(br.data(), DType::kI32), {static_cast<int64_t>(n)});
  std::vector<int32_t> want = s;
  want.resize(room, -7);
  EXPECT_EQ(download<int32_t>(br, room, DType::kI32), want);
  // Nothing to send: nothing is written.
  Buffer br2 = upload(sentinel, DType::kI32);
  comm_->all_to_all_v(*be_, Tensor(bs.data(), DType::kI32), {0}, Tensor(br2.data(), DType::kI32),
                      {0});
  EXPECT_EQ(download<int32_t>(br2, room, DType::kI32), sentinel);
  // One count per rank.
  EXPECT_THROW(comm_->all_to_all_v(*be_, Tensor(bs.data(), DType::kI32), {1, 1},
                                   Tensor(br.data(), DType::kI32), {1, 1}),
               Error);
}

// Start both collectives, queue nothing in between, wait in the other order; the backend's work
// before the start (a scale) is in the result and its work after wait (another scale) follows it.
TEST_F(NcclOneRank, AsyncStartAndWaitOrderTheBackendsWork) {
  const size_t n = 4096;
  const std::vector<float> f = pattern(n, 1.0f);
  Buffer a = upload(f, DType::kF32), g = upload(f, DType::kF32);
  const Tensor ta(a.data(), DType::kF32), tg(g.data(), DType::kF32);
  be_->scale(ta, static_cast<int64_t>(n), 2.0);  // before the start: must be in the result
  const CommTicket rs = comm_->reduce_scatter_sum_start(*be_, ta, static_cast<int64_t>(n));
  const CommTicket ag = comm_->all_gather_in_place_start(*be_, tg, static_cast<int64_t>(n));
  EXPECT_NE(rs.id, 0u);
  EXPECT_NE(ag.id, 0u);
  EXPECT_NE(rs.id, ag.id);
  comm_->wait(*be_, ag);
  comm_->wait(*be_, rs);
  be_->scale(ta, static_cast<int64_t>(n), 0.5);  // after wait
  be_->scale(tg, static_cast<int64_t>(n), 4.0);
  std::vector<float> want_g(n);
  for (size_t i = 0; i < n; ++i) want_g[i] = 4.0f * f[i];  // exact: powers of two
  EXPECT_EQ(download<float>(a, n, DType::kF32), f);
  EXPECT_EQ(download<float>(g, n, DType::kF32), want_g);
  EXPECT_THROW(comm_->wait(*be_, rs), Error) << "a ticket is waited for once";
  comm_->wait(*be_, CommTicket{});  // ticket 0: already complete
}

// Tensors of a backend without a stream (the optimizer's host backend beside the GPU) go
// through the wrapped Comm: here the single one, whose all-to-all copies the block.
TEST_F(NcclOneRank, HostBackendTensorsGoThroughTheWrappedComm) {
  std::unique_ptr<Backend> cpu = backend_create("cpu");
  std::vector<float> send = pattern(19, 2.0f), recv(19, -1.0f);
  comm_->all_to_all_v(*cpu, Tensor(send.data(), DType::kF32), {19},
                      Tensor(recv.data(), DType::kF32), {19});
  EXPECT_EQ(recv, send);
  comm_->all_reduce_sum(*cpu, Tensor(send.data(), DType::kF32), 19);
  EXPECT_EQ(comm_->reduce_scatter_sum_start(*cpu, Tensor(send.data(), DType::kF32), 19).id, 0u);
}

TEST_F(NcclOneRank, SumsOf16BitValuesAreRefusedAndHostValuesPassThrough) {
  Buffer b = be_->allocate(MemTag::kWorkspace, 64);
  EXPECT_THROW(comm_->all_reduce_sum(*be_, Tensor(b.data(), DType::kBF16), 8), Error);
  double v[2] = {1.5, -2.0};
  comm_->all_reduce_sum(v, 2);
  EXPECT_EQ(v[0], 1.5);
  EXPECT_EQ(comm_->all_gather_text("x"), std::vector<std::string>{"x"});
  comm_->barrier();
}

}  // namespace
}  // namespace ledgerlm
