// The MPI Comm (see comm.h): OpenMPI collectives on MPI_COMM_WORLD. Built when CMake finds MPI
// (LEDGERLM_HAVE_MPI); chosen at run time when mpirun started the process with several ranks.
//
// MPI is initialised with MPI_THREAD_FUNNELED: only the main thread calls MPI, the OpenMP
// threads of the backend never do. Host-memory tensors go to MPI as they are; a device backend's
// are staged through a host buffer with the backend's copies (a CUDA build adds NCCL later).
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "model/base/check.h"
#include "train/comm/comm.h"

namespace ledgerlm {
namespace {

MPI_Datatype sum_type(DType dt) {
  if (dt == DType::kF32) return MPI_FLOAT;
  if (dt == DType::kF64) return MPI_DOUBLE;
  fail(error_message("comm: sums are of fp32 or fp64 values, not ", dtype_name(dt),
                     " (widen 16-bit gradients into an fp32 buffer first)"));
}

int mpi_count(int64_t n) {
  LLM_REQUIRE(n >= 0 && n <= std::numeric_limits<int>::max(), "comm: ", n,
              " elements in one collective exceed MPI's int count");
  return static_cast<int>(n);
}

void check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail(error_message("MPI ", what, " failed: ", std::string(text, static_cast<size_t>(len))));
}

// Host bytes of a backend tensor: the tensor itself for a host backend, else a staging copy
// that is written back on finish().
class HostView {
 public:
  HostView(Backend& be, Tensor t, int64_t n, bool read)
      : be_(be), t_(t), n_(n), host_(be.memory_space() == MemSpace::kHost) {
    if (host_) return;
    staging_.resize(static_cast<size_t>(n) * dtype_size(t.dtype));
    if (read) be_.copy_to_host(staging_.data(), t_, n_);
  }
  void* data() { return host_ ? t_.data : staging_.data(); }
  void finish() {
    if (!host_) be_.copy_from_host(t_, staging_.data(), n_);
  }

 private:
  Backend& be_;
  Tensor t_;
  int64_t n_;
  bool host_;
  std::vector<char> staging_;
};

class MpiComm final : public Comm {
 public:
  MpiComm() {
    int provided = 0;
    check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    // Errors come back as return codes (then an Error naming the collective), not an abort
    // deep inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_world_);
  }
  ~MpiComm() override {
    MPI_Comm_free(&node_);
    MPI_Finalize();
  }

  std::string name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  int local_rank() const override { return local_rank_; }
  int local_world() const override { return local_world_; }

  void all_reduce_sum(Backend& be, Tensor data, int64_t n) override {
    HostView v(be, data, n, true);
    check(MPI_Allreduce(MPI_IN_PLACE, v.data(), mpi_count(n), sum_type(data.dtype), MPI_SUM,
                        MPI_COMM_WORLD),
          "all-reduce");
    v.finish();
  }

  void reduce_scatter_sum(Backend& be, Tensor data, int64_t n) override {
    HostView v(be, data, n * world_, true);
    check(MPI_Reduce_scatter_block(MPI_IN_PLACE, v.data(), mpi_count(n), sum_type(data.dtype),
                                   MPI_SUM, MPI_COMM_WORLD),
          "reduce-scatter");
    v.finish();
  }

  void all_to_all_v(Backend& be, Tensor send, const std::vector<int64_t>& send_counts, Tensor recv,
                    const std::vector<int64_t>& recv_counts) override {
    const size_t W = static_cast<size_t>(world_);
    LLM_REQUIRE(send_counts.size() == W && recv_counts.size() == W,
                "comm: an all-to-all needs one count per rank");
    const int64_t es = static_cast<int64_t>(dtype_size(send.dtype));
    std::vector<int> sc(W), sd(W), rc(W), rd(W);
    int64_t s_total = 0, r_total = 0;
    for (size_t r = 0; r < W; ++r) {
      sc[r] = mpi_count(send_counts[r] * es);
      sd[r] = mpi_count(s_total * es);
      rc[r] = mpi_count(recv_counts[r] * es);
      rd[r] = mpi_count(r_total * es);
      s_total += send_counts[r];
      r_total += recv_counts[r];
    }
    HostView s(be, send, s_total, true), v(be, recv, r_total, false);
    check(MPI_Alltoallv(s.data(), sc.data(), sd.data(), MPI_BYTE, v.data(), rc.data(), rd.data(),
                        MPI_BYTE, MPI_COMM_WORLD),
          "all-to-all");
    v.finish();
  }
  void all_gather_in_place(Backend& be, Tensor data, int64_t n) override {
    const int64_t bytes = n * static_cast<int64_t>(dtype_size(data.dtype));
    HostView v(be, data, n * world_, true);
    check(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v.data(), mpi_count(bytes), MPI_BYTE,
                        MPI_COMM_WORLD),
          "all-gather");
    v.finish();
  }

  void all_reduce_sum(double* values, int count) override {
    check(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD),
          "all-reduce");
  }
  void all_reduce_max(int64_t* values, int count) override {
    check(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD),
          "all-reduce");
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    check(MPI_Bcast(data, mpi_count(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
  }

  std::vector<std::string> all_gather_text(const std::string& mine) override {
    const int len = mpi_count(static_cast<int64_t>(mine.size()));
    std::vector<int> lens(static_cast<size_t>(world_));
    check(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD), "all-gather");
    std::vector<int> displs(lens.size(), 0);
    int64_t total = 0;
    for (size_t r = 0; r < lens.size(); ++r) {
      displs[r] = mpi_count(total);
      total += lens[r];
    }
    std::vector<char> all(static_cast<size_t>(total) + 1);
    check(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                         MPI_CHAR, MPI_COMM_WORLD),
          "all-gather");
    std::vector<std::string> out;
    for (size_t r = 0; r < lens.size(); ++r) out.emplace_back(all.data() + displs[r], lens[r]);
    return out;
  }

  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "barrier"); }

  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

 private:
  int rank_ = 0, world_ = 1, local_rank_ = 0, local_world_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
};

}  // namespace

std::unique_ptr<Comm> comm_create() {
  if (!comm_launched_by_mpirun()) return comm_create_single();
  return std::make_unique<MpiComm>();
}

const char* comm_build_backends() {
  return "mpi";
}

}  // namespace ledgerlm
