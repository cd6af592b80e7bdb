// The MPI Comm (see comm.h): OpenMPI collectives on MPI_COMM_WORLD. Built when CMake finds MPI
// (LEDGERLM_HAVE_MPI); chosen at run time when mpirun started the process with several ranks.
//
// MPI is initialised with MPI_THREAD_MULTIPLE: the main thread makes the job's calls and the
// watchdog's Backstop thread asks and answers census questions while the main thread is blocked
// in a collective (the OpenMP threads of the backend never call MPI). Host-memory tensors go to
// MPI as they are; a device backend's are staged through a host buffer with the backend's copies
// (with dist.comm choosing NCCL, the NCCL Comm moves them instead and wraps this one).
//
// Every collective first passes the gate (comm_mpi_gate.h: every rank has arrived, or the job
// ends naming the ranks that did not), then runs as the same blocking MPI call as without it,
// watched by the Backstop (comm_watch.h) in case a rank stalls inside it.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "model/base/check.h"
#include "train/comm/comm.h"
#include "train/comm/comm_mpi_check.h"
#include "train/comm/comm_mpi_gate.h"

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
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "init");
    if (provided < MPI_THREAD_MULTIPLE) {
      MPI_Finalize();
      fail(
          "this MPI library does not provide MPI_THREAD_MULTIPLE, which the watchdog of the "
          "collectives needs (a thread that answers while the main thread waits)");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_);
    // Errors come back as return codes (then an Error naming the collective), not an abort
    // deep inside MPI.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
    MPI_Comm_rank(node_, &local_rank_);
    MPI_Comm_size(node_, &local_world_);
    gate_ = std::make_unique<MpiGate>(MPI_COMM_WORLD, watch_);
    backstop_ = std::make_unique<Backstop>([this](BlockedSection& s) { on_blocked(s); });
  }
  ~MpiComm() override {
    backstop_.reset();
    gate_.reset();  // frees its communicator: before MPI_Finalize
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
    const int count = mpi_count(n);
    const MPI_Datatype type = sum_type(data.dtype);
    run("all-reduce", [&] {
      return MPI_Allreduce(MPI_IN_PLACE, v.data(), count, type, MPI_SUM, MPI_COMM_WORLD);
    });
    v.finish();
  }

  void reduce_scatter_sum(Backend& be, Tensor data, int64_t n) override {
    HostView v(be, data, n * world_, true);
    const int count = mpi_count(n);
    const MPI_Datatype type = sum_type(data.dtype);
    run("reduce-scatter", [&] {
      return MPI_Reduce_scatter_block(MPI_IN_PLACE, v.data(), count, type, MPI_SUM, MPI_COMM_WORLD);
    });
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
    run("all-to-all", [&] {
      return MPI_Alltoallv(s.data(), sc.data(), sd.data(), MPI_BYTE, v.data(), rc.data(), rd.data(),
                           MPI_BYTE, MPI_COMM_WORLD);
    });
    v.finish();
  }
  void all_gather_in_place(Backend& be, Tensor data, int64_t n) override {
    const int64_t bytes = n * static_cast<int64_t>(dtype_size(data.dtype));
    HostView v(be, data, n * world_, true);
    const int count = mpi_count(bytes);
    run("all-gather", [&] {
      return MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, v.data(), count, MPI_BYTE,
                           MPI_COMM_WORLD);
    });
    v.finish();
  }

  void all_reduce_sum(double* values, int count) override {
    run("all-reduce", [&] {
      return MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    });
  }
  void all_reduce_max(int64_t* values, int count) override {
    run("all-reduce", [&] {
      return MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
    });
  }
  void broadcast(void* data, int64_t bytes, int root) override {
    const int count = mpi_count(bytes);
    run("broadcast", [&] { return MPI_Bcast(data, count, MPI_BYTE, root, MPI_COMM_WORLD); });
  }

  std::vector<std::string> all_gather_text(const std::string& mine) override {
    const int len = mpi_count(static_cast<int64_t>(mine.size()));
    std::vector<int> lens(static_cast<size_t>(world_));
    run("all-gather",
        [&] { return MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD); });
    std::vector<int> displs(lens.size(), 0);
    int64_t total = 0;
    for (size_t r = 0; r < lens.size(); ++r) {
      displs[r] = mpi_count(total);
      total += lens[r];
    }
    std::vector<char> all(static_cast<size_t>(total) + 1);
    run("all-gather", [&] {
      return MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(),
                            MPI_CHAR, MPI_COMM_WORLD);
    });
    std::vector<std::string> out;
    for (size_t r = 0; r < lens.size(); ++r) out.emplace_back(all.data() + displs[r], lens[r]);
    return out;
  }

  void barrier() override {
    run("barrier", [] { return MPI_Barrier(MPI_COMM_WORLD); });
  }

  // MPI_Abort has mpirun end every rank with SIGKILL after SIGTERM, stopped ones included.
  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::_Exit(exit_code);
  }

  void hand_failure_to_lead(const std::string& line) override { gate_->hand_failure_to_lead(line); }

 private:
  // One collective: the gate, then `call` (the blocking MPI call, returning its code) under the
  // Backstop.
  template <class Call>
  void run(const char* collective, Call&& call) {
    gate_->arrive(collective);
    backstop_->arm(watch_, collective);
    struct Disarm {
      Backstop& b;
      ~Disarm() { b.disarm(); }
    } disarm{*backstop_};
    mpi_check(call(), collective);
  }

  // The Backstop's thread, while the main thread is blocked in a collective. When the job must
  // end, this thread reports it: the line, the run's record (last words: the main thread, blocked
  // in MPI, is not changing the run's state, and if its call returns it waits in disarm() until
  // this hook is done), then MPI_Abort.
  void on_blocked(BlockedSection& section) {
    std::string line;
    try {
      line = gate_->blocked(section, *backstop_);
      if (line.empty()) return;
    } catch (const Error& e) {  // the census itself failed: end the job all the same
      line = error_message("rank ", rank_, ": ", e.what(), " (ending every rank of the job)");
    }
    std::fprintf(stderr, "ledgerlm: error: %s\n", line.c_str());
    std::fflush(stderr);
    if (last_words_) last_words_(line);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  int rank_ = 0, world_ = 1, local_rank_ = 0, local_world_ = 1;
  MPI_Comm node_ = MPI_COMM_NULL;
  std::unique_ptr<MpiGate> gate_;
  std::unique_ptr<Backstop> backstop_;
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
