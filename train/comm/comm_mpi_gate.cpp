// The MPI gate before every collective: arrival, census and failure hand-over (see
// comm_mpi_gate.h).
#include "train/comm/comm_mpi_gate.h"

#include <cstdio>
#include <cstring>
#include <iterator>

#include "model/base/check.h"
#include "train/comm/comm_mpi_check.h"

namespace ledgerlm {
namespace {

std::string pack(const uint64_t* values, size_t count) {
  return std::string(reinterpret_cast<const char*>(values), count * sizeof(uint64_t));
}

}  // namespace

MpiGate::MpiGate(MPI_Comm world, const CommWatch& watch) : watch_(watch) {
  mpi_check(MPI_Comm_dup(world, &comm_), "communicator duplication");
  mpi_check(MPI_Comm_dup(world, &gate_comm_), "communicator duplication");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(gate_comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
  arrival_ = std::make_unique<MpiArrival>(gate_comm_);
}

MpiGate::~MpiGate() {
  // Sends still in flight (replies to a census that ended): give them a moment, then let go.
  AwakeClock clock;
  while (!pending_.empty() && clock.tick() < 1.0) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? pending_.erase(it) : std::next(it);
    }
    PollBackoff::sleep(PollBackoff::kMaxSleep);
  }
  for (PendingSend& p : pending_) MPI_Request_free(&p.request);
  arrival_.reset();
  MPI_Comm_free(&gate_comm_);
  MPI_Comm_free(&comm_);
}

void MpiGate::arrive(const char* collective) {
  ++seq_;
  arrival_->start(seq_);
  auto gate_done = [&] { return arrival_->test(); };
  AwakeClock waited;
  double next_check = watch_.limit();
  int quiet = 0;  // censuses that found every rank here
  for (;;) {
    if (gate_done()) return;
    const std::string handed = serve(true);
    if (!handed.empty()) throw JobError(handed);
    const double now = waited.tick();
    if (now < next_check) {
      PollBackoff::pause(now);
      continue;
    }
    Verdict v;
    const Census c = census(gate_done, watch_, collective, &v);
    if (c == Census::kWaitOver) {  // the last rank arrived after all: the job goes on
      const std::string line = watch_.late_message(rank_, collective, waited.tick());
      std::fprintf(stderr, "ledgerlm: warning: %s\n", line.c_str());
      std::fflush(stderr);
      return;
    }
    // Every rank answered: the first time, it is here (the barrier completes in a moment).
    if (c == Census::kAllAnswered && ++quiet < 2) {
      next_check = waited.tick() + watch_.limit();
      continue;
    }
    if (c == Census::kAllAnswered) v = stuck(watch_, collective);
    throw JobError(relay(v));
  }
}

std::string MpiGate::blocked(BlockedSection& section, const Backstop& backstop) {
  const std::string handed = serve(true);
  if (!handed.empty()) return handed;
  if (section.awake < section.next_check) return "";
  Verdict v;
  const Census c =
      census([&] { return !backstop.inside(); }, section.watch, section.collective, &v);
  if (c == Census::kWaitOver) return "";  // the main thread left the collective
  if (c == Census::kAllAnswered && ++section.quiet_censuses < 2) {
    section.next_check = section.awake + section.watch.limit();
    return "";
  }
  if (c == Census::kAllAnswered) v = stuck(section.watch, section.collective);
  return relay(v);
}

MpiGate::Census MpiGate::census(const std::function<bool()>& over, const CommWatch& watch,
                                const char* collective, Verdict* v) {
  ++epoch_;
  replies_.assign(static_cast<size_t>(world_), kNoReply);
  replies_[static_cast<size_t>(rank_)] = seq_;
  for (int r = 0; r < world_; ++r)
    if (r != rank_) send(r, kAsk, pack(&epoch_, 1));
  AwakeClock grace;
  for (;;) {
    if (over()) return Census::kWaitOver;
    const std::string handed = serve(true);
    if (!handed.empty()) {  // another rank's verdict (this rank reports it) or a failure
      *v = {handed, rank_};
      return Census::kVerdict;
    }
    bool all = true;
    for (uint64_t s : replies_) all = all && s != kNoReply;
    if (all || grace.tick() >= kCensusGrace) break;
    PollBackoff::sleep(PollBackoff::kMaxSleep);  // nothing hurries here: the longest sleep
  }
  std::vector<int> silent;
  v->reporter = -1;  // the lowest rank that answered reports, so that the job says it once
  for (int r = 0; r < world_; ++r) {
    if (replies_[static_cast<size_t>(r)] == kNoReply)
      silent.push_back(r);
    else if (v->reporter < 0)
      v->reporter = r;
  }
  if (silent.empty()) return Census::kAllAnswered;
  v->line = watch.missing_message(silent, collective);
  return Census::kVerdict;
}

MpiGate::Verdict MpiGate::stuck(const CommWatch& watch, const char* collective) const {
  return {watch.stuck_message(collective, replies_), 0};
}

std::string MpiGate::relay(const Verdict& v) {
  if (v.reporter == rank_) return v.line;
  send(v.reporter, kVerdict, v.line);
  AwakeClock relay;
  while (relay.tick() < kRelayWait) {
    const std::string handed = serve(true);
    if (!handed.empty()) return handed;
    PollBackoff::sleep(PollBackoff::kMaxSleep);
  }
  return v.line;  // the reporter did not end the job: this rank does
}

std::string MpiGate::serve(bool answer) {
  std::string handed;
  for (;;) {
    int flag = 0;
    MPI_Status st;
    mpi_check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &flag, &st), "probe");
    if (!flag) break;
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    std::string bytes(static_cast<size_t>(count), '\0');
    mpi_check(MPI_Recv(bytes.data(), count, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, comm_,
                       MPI_STATUS_IGNORE),
              "receive");
    const int from = st.MPI_SOURCE;
    uint64_t values[2] = {0, 0};
    if (st.MPI_TAG == kAsk && bytes.size() == sizeof(uint64_t)) {
      std::memcpy(&values[0], bytes.data(), sizeof(uint64_t));
      values[1] = seq_;
      if (answer) send(from, kReply, pack(values, 2));
    } else if (st.MPI_TAG == kReply && bytes.size() == 2 * sizeof(uint64_t)) {
      std::memcpy(values, bytes.data(), bytes.size());
      // Answers to an earlier census (a rank that answered late) are dropped.
      if (values[0] == epoch_ && static_cast<size_t>(from) < replies_.size())
        replies_[static_cast<size_t>(from)] = values[1];
    } else if ((st.MPI_TAG == kVerdict || st.MPI_TAG == kFailed) && handed.empty()) {
      handed = bytes;
    }
  }
  for (auto it = pending_.begin(); it != pending_.end();) {
    int done = 0;
    mpi_check(MPI_Test(&it->request, &done, MPI_STATUS_IGNORE), "send");
    it = done ? pending_.erase(it) : std::next(it);
  }
  return handed;
}

void MpiGate::send(int to, int tag, const std::string& bytes) {
  pending_.push_back({MPI_REQUEST_NULL, bytes});
  PendingSend& p = pending_.back();
  mpi_check(MPI_Isend(p.bytes.data(), static_cast<int>(p.bytes.size()), MPI_BYTE, to, tag, comm_,
                      &p.request),
            "send");
}

void MpiGate::hand_failure_to_lead(const std::string& line) {
  if (rank_ == 0 || world_ == 1) return;
  try {
    send(0, kFailed, line);
    // Rank 0 takes it at its next collective and ends the job; this rank waits to be ended (as
    // long as a collective may wait), serving the channel so that the send completes.
    AwakeClock clock;
    const double bound = watch_.limit();
    for (double waited = 0.0; waited < bound; waited = clock.tick()) {
      serve(false);
      PollBackoff::pause(waited);
    }
  } catch (const Error&) {
    // The channel itself failed: the caller reports the line and ends the job.
  }
}

}  // namespace ledgerlm
