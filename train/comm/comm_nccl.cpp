// The NCCL Comm (comm_select.h): device tensors move between GPUs through NCCL, host values go
// through the Comm it wraps: MPI's, or in a build without MPI the single one (one rank, where
// the unique id needs no broadcast, the barrier and the agreements are the rank's own and the
// sums are of one term). Built in every CUDA build that found nccl.h (LEDGERLM_HAVE_NCCL);
// libnccl.so.2 is opened at run time, so the binary starts on a machine without it.
//
// Ordering without blocking the host: each collective runs on this Comm's own stream, after an
// event recorded on the backend's stream (the data is ready), and records a done event that the
// backend's stream waits on (wait(), or at once for the blocking-looking calls). The host only
// queues work; a later host read of the result (a copy to the host) waits on the device.
//
// Timeouts: before each NCCL call every rank passes the wrapped Comm's barrier, whose gate names
// the ranks that do not arrive (comm_mpi_gate.h). NCCL runs non-blocking (ncclConfig_t.blocking
// = 0): a call that returns ncclInProgress is polled with ncclCommGetAsyncError under the watch's
// limit. Once queued, a collective is watched by this Comm's thread: it polls the done events and
// ncclCommGetAsyncError and, past the limit (counted from when the collective became the oldest
// outstanding one), aborts the communicator and ends the job. NCCL does not say which rank
// stalled, and the line says so.
//
// Determinism: NCCL_ALGO=Ring and NCCL_PROTO=Simple are set before NCCL initialises unless the
// user set them (docs/gpu.md says what that does and does not guarantee).
#include <cuda_runtime.h>
#include <nccl.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <type_traits>
#include <unordered_map>

#include "model/base/check.h"
#include "model/base/subnormals.h"
#include "train/comm/comm_select.h"

namespace ledgerlm {
namespace {

// The NCCL entry points the Comm calls, resolved from the dlopened library (nccl.h only gives
// their types: nothing links against libnccl).
struct NcclApi {
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRankConfig) init_rank_config = nullptr;
  decltype(&::ncclCommGetAsyncError) get_async_error = nullptr;
  decltype(&::ncclCommAbort) abort = nullptr;
  decltype(&::ncclCommFinalize) finalize = nullptr;
  decltype(&::ncclCommDestroy) destroy = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
  decltype(&::ncclGetLastError) last_error = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclReduceScatter) reduce_scatter = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclSend) send = nullptr;
  decltype(&::ncclRecv) recv = nullptr;
  decltype(&::ncclGroupStart) group_start = nullptr;
  decltype(&::ncclGroupEnd) group_end = nullptr;

  explicit NcclApi(const SharedLibrary& lib) {
    std::string why;
    auto load = [&](auto& fn, const char* name) {
      fn = lib.function<std::remove_reference_t<decltype(fn)>>(name, &why);
      LLM_REQUIRE(fn != nullptr, why);  // nccl_library_open checked every symbol already
    };
    load(get_unique_id, "ncclGetUniqueId");
    load(init_rank_config, "ncclCommInitRankConfig");
    load(get_async_error, "ncclCommGetAsyncError");
    load(abort, "ncclCommAbort");
    load(finalize, "ncclCommFinalize");
    load(destroy, "ncclCommDestroy");
    load(error_string, "ncclGetErrorString");
    load(last_error, "ncclGetLastError");
    load(all_reduce, "ncclAllReduce");
    load(reduce_scatter, "ncclReduceScatter");
    load(all_gather, "ncclAllGather");
    load(send, "ncclSend");
    load(recv, "ncclRecv");
    load(group_start, "ncclGroupStart");
    load(group_end, "ncclGroupEnd");
  }
};

void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    fail(error_message("NCCL comm: ", what, " failed: ", cudaGetErrorString(e)));
}

ncclDataType_t sum_type(DType dt) {
  if (dt == DType::kF32) return ncclFloat32;
  if (dt == DType::kF64) return ncclFloat64;
  fail(error_message("comm: sums are of fp32 or fp64 values, not ", dtype_name(dt),
                     " (widen 16-bit gradients into an fp32 buffer first)"));
}

// Pins NCCL's algorithm and protocol unless the user chose them; returns what it set.
std::string pin_determinism() {
  std::string set;
  for (const auto& [name, value] : {std::pair{"NCCL_ALGO", "Ring"}, {"NCCL_PROTO", "Simple"}}) {
    if (std::getenv(name) != nullptr) continue;
    ::setenv(name, value, 0);
    set += error_message(set.empty() ? "" : " ", name, "=", value);
  }
  return set;
}

// A queued collective the watch thread waits for.
struct Outstanding {
  cudaEvent_t done = nullptr;
  uint64_t seq = 0;  // which collective (an event's handle may be reused once destroyed)
  const char* collective = "";
  CommWatch watch;  // a copy at the start: the phase and limit to name
};

class NcclComm final : public Comm {
 public:
  NcclComm(Comm& host, Backend& be, std::unique_ptr<SharedLibrary> lib, int version)
      : host_(host), lib_(std::move(lib)), api_(*lib_), version_(version) {
    compute_ = static_cast<cudaStream_t>(be.native_stream());
    LLM_REQUIRE(compute_ != nullptr, "NCCL comm: backend '", be.name(),
                "' has no CUDA stream (NCCL moves GPU memory only)");
    cuda_ok(cudaGetDevice(&device_), "cudaGetDevice");
    cuda_ok(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    cuda_ok(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    pinned_ = pin_determinism();
    init();
    watcher_ = std::thread([this] { watch_loop(); });
  }

  ~NcclComm() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    queued_.notify_one();
    if (watcher_.joinable()) watcher_.join();
    // NCCL's way down: finalize (flushes the queued work on every rank), wait until the
    // communicator is quiescent, then destroy. A peer that never gets there (the job is ending
    // anyway: nothing here can be reported) is given the watch's limit, then the communicator
    // is aborted instead.
    if (!aborted_ && comm_ != nullptr) {
      ncclResult_t state = api_.finalize(comm_);
      AwakeClock clock;
      double waited = 0.0;
      while (state == ncclSuccess || state == ncclInProgress) {
        if (api_.get_async_error(comm_, &state) != ncclSuccess || state != ncclInProgress) break;
        waited = clock.tick();
        if (waited > watch().limit()) break;
        PollBackoff::pause(waited);
      }
      if (state == ncclSuccess)
        api_.destroy(comm_);
      else
        api_.abort(comm_);
    }
    cudaStreamSynchronize(stream_);
    for (Outstanding& o : outstanding_) cudaEventDestroy(o.done);
    for (auto& [id, ev] : tickets_) cudaEventDestroy(ev);
    cudaEventDestroy(ready_);
    cudaStreamDestroy(stream_);
  }

  std::string name() const override { return "nccl"; }
  int rank() const override { return host_.rank(); }
  int world() const override { return host_.world(); }
  int local_rank() const override { return host_.local_rank(); }
  int local_world() const override { return host_.local_world(); }

  // ---- device tensors: NCCL on this Comm's stream ---------------------------------------------
  // A backend without a CUDA stream holds its tensors in host memory (the optimizer's host
  // backend beside the GPU, ZeRO's exchange of its pieces): those go through the wrapped Comm.
  void all_reduce_sum(Backend& be, Tensor data, int64_t n) override {
    if (be.native_stream() == nullptr) return host().all_reduce_sum(be, data, n);
    wait(be, all_reduce_start(be, data, n));
  }
  void reduce_scatter_sum(Backend& be, Tensor data, int64_t n) override {
    wait(be, reduce_scatter_sum_start(be, data, n));
  }
  void all_gather_in_place(Backend& be, Tensor data, int64_t n) override {
    wait(be, all_gather_in_place_start(be, data, n));
  }

  CommTicket reduce_scatter_sum_start(Backend& be, Tensor data, int64_t n) override {
    if (be.native_stream() == nullptr) return host().reduce_scatter_sum_start(be, data, n);
    const ncclDataType_t type = sum_type(data.dtype);
    const size_t es = dtype_size(data.dtype);
    char* base = static_cast<char*>(data.data);
    // NCCL's in-place form leaves the sum at data[rank * n, ...); the interface wants it at
    // data[0, n): one copy on the comm stream (the two ranges do not overlap for rank > 0).
    char* mine = base + static_cast<size_t>(rank()) * static_cast<size_t>(n) * es;
    return run(be, "reduce-scatter", [&] {
      nccl_ok(
          api_.reduce_scatter(base, mine, static_cast<size_t>(n), type, ncclSum, comm_, stream_),
          "ncclReduceScatter");
      settle("reduce-scatter");
      if (rank() != 0 && n > 0)
        cuda_ok(cudaMemcpyAsync(base, mine, static_cast<size_t>(n) * es, cudaMemcpyDeviceToDevice,
                                stream_),
                "cudaMemcpyAsync");
    });
  }

  CommTicket all_gather_in_place_start(Backend& be, Tensor data, int64_t n) override {
    if (be.native_stream() == nullptr) return host().all_gather_in_place_start(be, data, n);
    const size_t bytes = static_cast<size_t>(n) * dtype_size(data.dtype);
    char* base = static_cast<char*>(data.data);
    char* mine = base + static_cast<size_t>(rank()) * bytes;  // NCCL's in-place form
    return run(be, "all-gather", [&] {
      nccl_ok(api_.all_gather(mine, base, bytes, ncclUint8, comm_, stream_), "ncclAllGather");
      settle("all-gather");
    });
  }

  void wait(Backend& be, CommTicket ticket) override {
    if (ticket.id == 0) return;  // completed at the start (the wrapped Comm's)
    auto it = tickets_.find(ticket.id);
    LLM_REQUIRE(it != tickets_.end(), "NCCL comm: ticket ", ticket.id,
                " was never started or was waited for already");
    cudaStream_t compute = static_cast<cudaStream_t>(be.native_stream());
    cuda_ok(cudaStreamWaitEvent(compute, it->second, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(it->second);  // released once the device passed it
    tickets_.erase(it);
  }

  void all_to_all_v(Backend& be, Tensor send, const std::vector<int64_t>& send_counts, Tensor recv,
                    const std::vector<int64_t>& recv_counts) override {
    if (be.native_stream() == nullptr)
      return host().all_to_all_v(be, send, send_counts, recv, recv_counts);
    const size_t W = static_cast<size_t>(world());
    LLM_REQUIRE(send_counts.size() == W && recv_counts.size() == W,
                "comm: an all-to-all needs one count per rank");
    const size_t es = dtype_size(send.dtype);
    const char* s = static_cast<const char*>(send.data);
    char* r = static_cast<char*>(recv.data);
    wait(be, run(be, "all-to-all", [&] {
           nccl_ok(api_.group_start(), "ncclGroupStart");
           size_t s_off = 0, r_off = 0;
           for (size_t peer = 0; peer < W; ++peer) {
             const size_t sb = static_cast<size_t>(send_counts[peer]) * es;
             const size_t rb = static_cast<size_t>(recv_counts[peer]) * es;
             // A zero count on one side is a zero count on the other: both skip the pair.
             if (sb > 0)
               nccl_ok(api_.send(s + s_off, sb, ncclUint8, static_cast<int>(peer), comm_, stream_),
                       "ncclSend");
             if (rb > 0)
               nccl_ok(api_.recv(r + r_off, rb, ncclUint8, static_cast<int>(peer), comm_, stream_),
                       "ncclRecv");
             s_off += sb;
             r_off += rb;
           }
           nccl_ok(api_.group_end(), "ncclGroupEnd");
           settle("all-to-all");
         }));
  }

  // ---- host values: the wrapped Comm ----------------------------------------------------------
  void all_reduce_sum(double* values, int count) override { host().all_reduce_sum(values, count); }
  void all_reduce_max(int64_t* values, int count) override { host().all_reduce_max(values, count); }
  void broadcast(void* data, int64_t bytes, int root) override {
    host().broadcast(data, bytes, root);
  }
  std::vector<std::string> all_gather_text(const std::string& mine) override {
    return host().all_gather_text(mine);
  }
  void barrier() override { host().barrier(); }

  // One watch and one record for the job's end: the wrapped Comm's (its gate and Backstop use
  // them; this Comm's watch thread reads the words while ending the job).
  CommWatch& watch() override { return host_.watch(); }
  void set_last_words(std::function<void(const std::string& reason)> fn) override {
    host_.set_last_words(fn);
    std::lock_guard<std::mutex> lock(words_mu_);
    last_words_ = std::move(fn);
  }
  [[noreturn]] void abort(int exit_code) override {
    host().abort(exit_code);
    std::_Exit(exit_code);  // not reached: the wrapped Comm's abort does not return
  }
  void hand_failure_to_lead(const std::string& line) override { host().hand_failure_to_lead(line); }

  std::string describe() const {
    return error_message("NCCL ", nccl_version_text(version_), " (", lib_->path(), ")",
                         pinned_.empty() ? "" : ", " + pinned_);
  }

 private:
  void init() {
    // Rank 0 makes the id; every rank learns whether that worked (an error on rank 0 alone
    // would leave the others waiting in the initialisation).
    struct IdMessage {
      int ok = 0;
      ncclUniqueId id;
    } msg{};
    std::string bad;
    if (rank() == 0) {
      const ncclResult_t rc = api_.get_unique_id(&msg.id);
      msg.ok = rc == ncclSuccess ? 1 : 0;
      if (!msg.ok) bad = result_text(rc);
    }
    host().broadcast(&msg, static_cast<int64_t>(sizeof msg), 0);
    if (!msg.ok)
      throw AgreedError(
          error_message("NCCL: ncclGetUniqueId failed on rank 0", bad.empty() ? "" : ": ", bad));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    std::string failed;
    try {
      nccl_ok(api_.init_rank_config(&comm_, world(), msg.id, rank(), &config),
              "ncclCommInitRankConfig");
      settle("initialisation");
    } catch (const JobError&) {
      throw;
    } catch (const Error& e) {
      failed = e.what();
    }
    // Every rank or none: a rank whose NCCL failed must not leave the others using theirs.
    const std::vector<std::string> all = host().all_gather_text(failed);
    for (size_t r = 0; r < all.size(); ++r)
      if (!all[r].empty()) {
        abort_comm();  // once: a failed call above may have aborted it already
        throw AgreedError(error_message("rank ", r, ": ", all[r]));
      }
  }

  std::string result_text(ncclResult_t rc) const {
    std::string text = api_.error_string(rc);
    const char* last = comm_ != nullptr && !aborted_ ? api_.last_error(comm_) : nullptr;
    if (last != nullptr && *last != '\0') text += std::string(": ") + last;
    return text;
  }

  void nccl_ok(ncclResult_t rc, const char* what) {
    if (rc == ncclSuccess || rc == ncclInProgress) return;
    const std::string text = result_text(rc);  // before the abort frees the communicator
    abort_comm();
    fail(error_message("NCCL ", what, " failed: ", text));
  }

  // Non-blocking NCCL: the last call may still be in progress; poll it under the watch's limit.
  void settle(const char* collective) {
    AwakeClock clock;
    double waited = 0.0;
    for (;;) {
      ncclResult_t state = ncclSuccess;
      if (comm_ != nullptr) nccl_ok(api_.get_async_error(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) {
        const std::string text = result_text(state);  // before the abort
        abort_comm();
        fail(error_message("NCCL ", collective, " failed: ", text));
      }
      waited = clock.tick();
      if (waited > watch().limit()) {
        abort_comm();
        throw JobError(watch().unattributed_message(rank(), "NCCL", collective));
      }
      PollBackoff::pause(waited);
    }
  }

  // Aborts the communicator once, from either thread (the watch thread stops using it after).
  void abort_comm() {
    std::lock_guard<std::mutex> lock(abort_mu_);
    if (comm_ == nullptr || aborted_) return;
    aborted_ = true;
    api_.abort(comm_);
  }

  // One collective: every rank arrives (the wrapped Comm's gate names those that do not), the
  // comm stream waits for the backend's work so far, `enqueue` queues NCCL's calls, and a done
  // event goes to the watch thread and to the ticket.
  template <class Enqueue>
  CommTicket run(Backend& be, const char* collective, Enqueue&& enqueue) {
    {
      std::lock_guard<std::mutex> lock(abort_mu_);
      LLM_REQUIRE(!aborted_, "NCCL comm: the communicator was aborted after an earlier failure");
    }
    host().barrier();
    cudaStream_t compute = static_cast<cudaStream_t>(be.native_stream());
    cuda_ok(cudaEventRecord(ready_, compute), "cudaEventRecord");
    cuda_ok(cudaStreamWaitEvent(stream_, ready_, 0), "cudaStreamWaitEvent");
    enqueue();
    cudaEvent_t for_ticket = nullptr, for_watch = nullptr;
    cuda_ok(cudaEventCreateWithFlags(&for_ticket, cudaEventDisableTiming), "cudaEventCreate");
    cuda_ok(cudaEventCreateWithFlags(&for_watch, cudaEventDisableTiming), "cudaEventCreate");
    cuda_ok(cudaEventRecord(for_ticket, stream_), "cudaEventRecord");
    cuda_ok(cudaEventRecord(for_watch, stream_), "cudaEventRecord");
    {
      std::lock_guard<std::mutex> lock(mu_);
      outstanding_.push_back({for_watch, next_ticket_ + 1, collective, watch()});
    }
    queued_.notify_one();
    const CommTicket ticket{++next_ticket_};
    tickets_.emplace(ticket.id, for_ticket);
    return ticket;
  }

  CommTicket all_reduce_start(Backend& be, Tensor data, int64_t n) {
    const ncclDataType_t type = sum_type(data.dtype);
    return run(be, "all-reduce", [&] {
      nccl_ok(api_.all_reduce(data.data, data.data, static_cast<size_t>(n), type, ncclSum, comm_,
                              stream_),
              "ncclAllReduce");
      settle("all-reduce");
    });
  }

  // The watch thread: the oldest queued collective must complete within the limit in effect when
  // it was started, counted from when it became the oldest (AwakeClock: a stopped process does
  // not expire it); NCCL's asynchronous errors end the job at once.
  void watch_loop() {
    cudaSetDevice(device_);
    AwakeClock clock;
    uint64_t front = 0;
    for (;;) {
      // Started with the Comm, before the run's config is read: precision.subnormals' mode as
      // it wakes to work (subnormals.h).
      subnormals_adopt();
      Outstanding o;
      {
        // Nothing queued: sleep until something is (no polling while the job computes).
        std::unique_lock<std::mutex> lock(mu_);
        queued_.wait(lock, [&] { return stop_ || !outstanding_.empty(); });
        if (stop_) return;
        o = outstanding_.front();
      }
      if (o.seq != front) {
        front = o.seq;
        clock = AwakeClock();
      }
      const cudaError_t q = cudaEventQuery(o.done);
      if (q == cudaSuccess) {
        std::lock_guard<std::mutex> lock(mu_);
        cudaEventDestroy(o.done);
        outstanding_.pop_front();
        continue;
      }
      std::string line;
      ncclResult_t state = ncclSuccess;
      ncclResult_t asked = ncclSuccess;
      {
        // The main thread aborted it after a failure it reports itself: nothing left to watch.
        std::lock_guard<std::mutex> lock(abort_mu_);
        if (aborted_) return;
        asked = api_.get_async_error(comm_, &state);
      }
      if (q != cudaErrorNotReady) {
        line = error_message("rank ", rank(), ": the NCCL ", o.collective,
                             " failed on the device: ", cudaGetErrorString(q));
      } else if (asked == ncclSuccess && state != ncclSuccess && state != ncclInProgress) {
        line = error_message("rank ", rank(), ": the NCCL ", o.collective,
                             " failed: ", api_.error_string(state));
      } else if (clock.tick() > o.watch.limit()) {
        line = o.watch.unattributed_message(rank(), "NCCL", o.collective);
      }
      if (!line.empty()) end_job(line);
      PollBackoff::sleep(kPollSleep);
    }
  }

  // From the watch thread, while the main thread may be blocked on the device: the line, the
  // run's record, the communicator aborted (its kernels end), then every rank. With one rank
  // there is no other to end, and the single Comm's abort (std::exit) would run the exit
  // handlers (the CUDA runtime's teardown among them) beside a main thread still inside a CUDA
  // call: the process ends at once instead, its output flushed.
  [[noreturn]] void end_job(const std::string& line) {
    std::fprintf(stderr, "ledgerlm: error: %s (ending every rank of the job)\n", line.c_str());
    std::fflush(stderr);
    {
      std::lock_guard<std::mutex> lock(words_mu_);
      if (last_words_) last_words_(line);
    }
    abort_comm();
    if (world() == 1) {
      std::fflush(nullptr);
      std::_Exit(1);
    }
    host_.abort(1);
    std::_Exit(1);  // not reached
  }

  static constexpr double kPollSleep = 1e-3;  // a collective in flight: its done event's polls

  Comm& host_;
  std::unique_ptr<SharedLibrary> lib_;
  NcclApi api_;
  int version_ = 0;
  std::string pinned_;
  int device_ = 0;
  cudaStream_t compute_ = nullptr;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  ncclComm_t comm_ = nullptr;
  Comm& host() { return host_; }

  std::mutex words_mu_;  // last_words_: set by the main thread, called by the watch thread
  std::mutex abort_mu_;
  bool aborted_ = false;  // under abort_mu_ where both threads may run
  uint64_t next_ticket_ = 0;
  std::unordered_map<uint64_t, cudaEvent_t> tickets_;  // main thread only

  std::mutex mu_;  // the watch thread's queue
  std::condition_variable queued_;
  std::deque<Outstanding> outstanding_;
  bool stop_ = false;
  std::thread watcher_;
};

}  // namespace

bool comm_nccl_built() {
  return true;
}

std::unique_ptr<Comm> comm_create_nccl(Comm& host, Backend& be, std::string* why) {
  // Every rank tries to load NCCL, then all agree: NCCL on every rank or on none.
  std::string reason;
  int version = 0;
  std::unique_ptr<SharedLibrary> lib =
      nccl_library_open(nccl_library_names(), NCCL_MAJOR, &reason, &version);
  if (lib != nullptr && be.native_stream() == nullptr) {
    reason = "backend '" + be.name() + "' has no CUDA stream";
    lib.reset();
  }
  const std::vector<std::string> all = host.all_gather_text(lib != nullptr ? "" : reason);
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) {
      *why = host.world() > 1 ? error_message("rank ", r, ": ", all[r]) : all[r];
      return nullptr;
    }
  auto comm = std::make_unique<NcclComm>(host, be, std::move(lib), version);
  if (host.rank() == 0) std::printf("dist.comm: %s\n", comm->describe().c_str());
  return comm;
}

}  // namespace ledgerlm
