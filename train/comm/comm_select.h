// Which Comm carries a run's device tensors (dist.comm), NCCL's library loaded at run time, and
// the NCCL Comm's factory. Pure decisions (comm_choose, nccl_version_check) are apart from the
// effects so that the rules are tested on any machine; the NCCL Comm itself (comm_nccl.cpp)
// exists in every CUDA build that found nccl.h, with MPI or without (then over the single Comm,
// one rank).
//
// dist.comm = auto takes NCCL when the device is cuda, the job has several ranks and NCCL loads
// on every rank, else the host Comm (MPI, or single with one rank). mpi never uses NCCL. nccl
// insists: it is refused with device cpu, and an error (not a fallback) when NCCL is absent; it
// is also the only way to run the NCCL Comm with one rank (its tests do).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/backend/backend.h"
#include "model/base/shared_library.h"
#include "train/comm/comm.h"

namespace ledgerlm {

// What comm_choose() decides before NCCL is tried.
enum class CommPlan {
  kHost,     // the host Comm as created by comm_create() (mpi or single)
  kTryNccl,  // NCCL if it loads (and initialises) on every rank, else the host Comm with a line
  kNccl,     // NCCL or an error
};

// The plan for dist.comm `asked` (auto | mpi | nccl) on device `device` (resolved: cpu | cuda)
// with `world` ranks in a build whose NCCL Comm exists or not (`nccl_built`). Throws Error for
// nccl on the CPU, and for nccl in a build without the NCCL Comm (the line says which build).
CommPlan comm_choose(const std::string& asked, const std::string& device, int world,
                     bool nccl_built);

// NCCL's version code (ncclGetVersion: 2.8.4 is 2804, 2.28.9 is 22809) as major.minor.patch.
struct NcclVersion {
  int major = 0, minor = 0, patch = 0;
};
NcclVersion nccl_version_decode(int code);
std::string nccl_version_text(int code);  // "2.28.9"
// "" when the library's version `code` has the major this build was compiled against (the ABI
// of ncclConfig_t and of the calls is kept within a major), else the reason.
std::string nccl_version_check(int code, int compiled_major);

// NCCL's shared library: the first of `names` that loads, whose ncclGetVersion answers with
// `compiled_major` and which has every symbol the NCCL Comm calls. nullptr with *why naming the
// library (or every name tried) and the reason. `version` (optional) receives the version code.
std::unique_ptr<SharedLibrary> nccl_library_open(const std::vector<std::string>& names,
                                                 int compiled_major, std::string* why,
                                                 int* version = nullptr);
// The names tried: $LEDGERLM_NCCL_LIBRARY when set (a path or a soname), else libnccl.so.2.
std::vector<std::string> nccl_library_names();
// The symbols the NCCL Comm resolves (nccl_library_open checks all of them).
const std::vector<const char*>& nccl_symbols();

// True in builds that contain the NCCL Comm (CUDA, nccl.h found; MPI or not).
bool comm_nccl_built();

// The NCCL Comm over `host` (which stays the caller's: it must outlive the result) for the
// device tensors of `be`; host values go through `host`. Collective over `host`'s ranks: every
// rank calls it, and it first agrees that NCCL loaded everywhere. nullptr with *why when NCCL is
// unavailable on some rank (the line names the rank and the reason); an Error when it loaded
// everywhere but failed to initialise. In a build without it: nullptr and a why saying so.
std::unique_ptr<Comm> comm_create_nccl(Comm& host, Backend& be, std::string* why);

// The Comm a run uses for `asked` (the plan above, then NCCL tried where it says so): `host`
// itself, or a NCCL Comm over it returned in *owned. Prints (on rank 0) one line when auto falls
// back, naming why; throws Error where nccl was asked and is unavailable.
Comm& comm_for_run(const std::string& asked, const std::string& device, Comm& host, Backend& be,
                   std::unique_ptr<Comm>* owned);

}  // namespace ledgerlm
