// The single-rank Comm (see comm.h), the factory and comm_agree.
#include <cstdlib>

#include "model/base/check.h"
#include "train/comm/comm.h"

namespace ledgerlm {
namespace {

class SingleComm final : public Comm {
 public:
  std::string name() const override { return "single"; }
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  int local_world() const override { return 1; }
  void all_reduce_sum(Backend&, Tensor, int64_t) override {}
  void reduce_scatter_sum(Backend&, Tensor, int64_t) override {}
  void all_gather_in_place(Backend&, Tensor, int64_t) override {}
  void all_to_all_v(Backend& be, Tensor send, const std::vector<int64_t>& send_counts, Tensor recv,
                    const std::vector<int64_t>& recv_counts) override {
    LLM_REQUIRE(
        send_counts.size() == 1 && recv_counts.size() == 1 && send_counts[0] == recv_counts[0],
        "comm: a one-rank all-to-all sends to itself what it receives");
    if (send.data != recv.data) be.copy(recv, send, send_counts[0]);
  }
  void all_reduce_sum(double*, int) override {}
  void all_reduce_max(int64_t*, int) override {}
  void broadcast(void*, int64_t, int) override {}
  std::vector<std::string> all_gather_text(const std::string& mine) override { return {mine}; }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

}  // namespace

std::unique_ptr<Comm> comm_create_single() {
  return std::make_unique<SingleComm>();
}

bool comm_launched_by_mpirun() {
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  return size != nullptr && std::atoi(size) > 1;
}

#if !defined(LEDGERLM_HAVE_MPI)
std::unique_ptr<Comm> comm_create() {
  LLM_REQUIRE(!comm_launched_by_mpirun(),
              "started by mpirun with several ranks, but this build of ledgerlm has no MPI "
              "support (install libopenmpi-dev and rebuild)");
  return comm_create_single();
}
const char* comm_build_backends() {
  return "";
}
#endif

void comm_agree(Comm& comm, const std::function<void()>& fn) {
  std::string failure;
  try {
    fn();
  } catch (const JobError&) {
    throw;  // agreeing would wait for the rank that is gone
  } catch (const Error& e) {
    failure = e.what();
    if (failure.empty()) failure = "error";
  }
  if (comm.world() == 1) {
    if (!failure.empty()) throw AgreedError(failure);
    return;
  }
  const std::vector<std::string> all = comm.all_gather_text(failure);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) throw AgreedError(error_message("rank ", r, ": ", all[r]));
}

}  // namespace ledgerlm
