// Communication between data-parallel ranks: the collectives the sharded training step needs,
// behind one interface with a single-rank implementation and an MPI one (OpenMPI; built when
// the MPI development files are found, used when the process was started by mpirun).
//
// Collectives on backend tensors sum fp32 or fp64 values only: bf16/fp16 gradients are widened
// into an fp32 buffer by the caller and summed there, so a reduction never rounds partial sums
// to 16 bits (the result is rounded once, where the caller stores it in a 16-bit buffer).
// Tensors are reached through the backend: a host backend's memory is handed to MPI directly;
// a device backend's is staged through host memory with the backend's copies, unless the run
// uses the NCCL Comm (comm_select.h), which moves device buffers on the GPUs and hands host
// values to the MPI Comm it wraps.
//
// Every rank must call the collectives in the same order with the same sizes. An Error on some
// ranks only must not leave the others waiting in a collective: code that can fail on one rank
// runs inside comm_agree(), and a failure anywhere else ends the whole job (hand_failure_to_lead,
// then Comm::abort).
//
// No collective waits forever: a rank that does not arrive within the watch's timeout
// (comm_watch.h) ends the job with a JobError naming it, and waiting ranks sleep instead of
// spinning.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/check.h"
#include "train/comm/comm_watch.h"

namespace ledgerlm {

// An Error every rank of the job raised at the same point (comm_agree): rank 0 reports it and
// every rank exits normally, instead of aborting the job.
class AgreedError : public Error {
 public:
  using Error::Error;
};

// A collective started by a *_start call and not yet waited for; id 0: already complete.
struct CommTicket {
  uint64_t id = 0;
};

class Comm {
 public:
  virtual ~Comm() = default;
  virtual std::string name() const = 0;  // "single" | "mpi" | "nccl"
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Rank among the processes on this host, and their number (threads per rank derive from it).
  virtual int local_rank() const = 0;
  virtual int local_world() const = 0;

  // data[0, n) = elementwise sum over ranks (fp32 or fp64), on every rank.
  virtual void all_reduce_sum(Backend& be, Tensor data, int64_t n) = 0;
  // In place: data holds world * n elements; afterwards data[0, n) is the sum over ranks of
  // their data[rank * n, (rank + 1) * n) (fp32 or fp64), and the rest is unspecified.
  virtual void reduce_scatter_sum(Backend& be, Tensor data, int64_t n) = 0;
  // data[r * n, (r + 1) * n) = rank r's data[r * n, (r + 1) * n), on every rank (any dtype):
  // each rank's piece is already in place and the others' are filled in.
  virtual void all_gather_in_place(Backend& be, Tensor data, int64_t n) = 0;
  // An all-to-all of variable sizes (any dtype; `send` and `recv` distinct): `send` holds the
  // blocks for ranks 0, 1, ... end to end, send_counts[r] elements for rank r; rank r's block
  // for this rank lands in `recv` after the blocks of ranks 0..r-1 (recv_counts[r] elements).
  // Whole-tensor optimizer work gathers pieces to owner ranks and scatters results with it.
  virtual void all_to_all_v(Backend& be, Tensor send, const std::vector<int64_t>& send_counts,
                            Tensor recv, const std::vector<int64_t>& recv_counts) = 0;

  // The same two collectives started for overlap with compute (ZeRO's per-unit gathers and
  // reductions): the transfer is queued and wait() orders the backend's later work after its
  // result, without blocking the host. Until wait(), the caller's work must not touch `data`.
  // Each ticket is waited for once, in any order. A Comm without a queue of its own (single,
  // MPI) completes the collective in the start call and returns ticket 0.
  virtual CommTicket reduce_scatter_sum_start(Backend& be, Tensor data, int64_t n) {
    reduce_scatter_sum(be, data, n);
    return {};
  }
  virtual CommTicket all_gather_in_place_start(Backend& be, Tensor data, int64_t n) {
    all_gather_in_place(be, data, n);
    return {};
  }
  virtual void wait(Backend& be, CommTicket ticket) {
    (void)be;
    (void)ticket;
  }

  // Host values: sums and maxima in place on every rank, a broadcast from `root`, every rank's
  // text on every rank (in rank order).
  virtual void all_reduce_sum(double* values, int count) = 0;
  virtual void all_reduce_max(int64_t* values, int count) = 0;
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  virtual std::vector<std::string> all_gather_text(const std::string& mine) = 0;
  virtual void barrier() = 0;
  // Ends every rank of the job at once (after this rank printed why).
  [[noreturn]] virtual void abort(int exit_code) = 0;

  // This rank failed alone (an Error outside comm_agree) with `line`, which names this rank. On
  // a rank other than 0 the line goes to rank 0, whose next collective throws it as a JobError:
  // rank 0 then records it (the run's summary.json) and ends the job. Returns when rank 0 did
  // not end the job within the timeout (it is stalled too), or at once on rank 0 or with one
  // rank; the caller then reports the line itself and calls abort().
  virtual void hand_failure_to_lead(const std::string& line) { (void)line; }

  // The timeout of the collectives and what the job is doing (named when a wait ends the job).
  // (virtual: a Comm that wraps another shares the wrapped one's, as the NCCL Comm does).
  virtual CommWatch& watch() { return watch_; }

  // What to record when the job ends from the watchdog's thread (the main thread blocked in a
  // collective); the main thread's own ends reach the caller as a JobError instead. Rank 0's
  // trainer sets it to write the failed run's summary, and clears it (nullptr) when the run
  // ends. It runs on that thread, while the main thread stays blocked.
  virtual void set_last_words(std::function<void(const std::string& reason)> fn) {
    last_words_ = std::move(fn);
  }

 protected:
  CommWatch watch_;
  std::function<void(const std::string&)> last_words_;
};

// The single-process Comm: every collective is the identity.
std::unique_ptr<Comm> comm_create_single();
// MPI when this process was started by mpirun (and the build has MPI), else single. Call once,
// before any thread is started by the program.
std::unique_ptr<Comm> comm_create();
// True when the environment says this process was started by mpirun with more than one rank.
bool comm_launched_by_mpirun();
// "mpi" when the build includes the MPI Comm, "" otherwise.
const char* comm_build_backends();

// Runs `fn` on every rank; if it throws an Error on any rank, every rank throws an AgreedError
// naming the first failing rank and its message. The way to validate per-rank inputs (data,
// checkpoint, config) without leaving healthy ranks waiting. A JobError (a rank gone) passes
// through unchanged.
void comm_agree(Comm& comm, const std::function<void()>& fn);

}  // namespace ledgerlm
