// dist.comm's decision, NCCL's loader and version check (comm_select.h). No CUDA or NCCL
// header here: the loader calls ncclGetVersion through its C ABI (an int result, an int*), so
// every build can test the loader and the rules.
#include "train/comm/comm_select.h"

#include <cstdio>
#include <cstdlib>

#include "model/base/check.h"

namespace ledgerlm {

CommPlan comm_choose(const std::string& asked, const std::string& device, int world,
                     bool nccl_built) {
  if (asked == "mpi") return CommPlan::kHost;
  if (asked == "auto") {
    if (device != "cuda" || world < 2 || !nccl_built) return CommPlan::kHost;
    return CommPlan::kTryNccl;
  }
  LLM_REQUIRE(asked == "nccl", "dist.comm: expected one of auto, mpi, nccl (got '", asked, "')");
  LLM_REQUIRE(device == "cuda", "dist.comm = nccl needs train.device = cuda (the device is ",
              device, "; NCCL moves GPU memory only: use dist.comm = auto or mpi)");
  LLM_REQUIRE(nccl_built,
              "dist.comm = nccl: this build of ledgerlm has no NCCL Comm (it needs a CUDA build "
              "that found nccl.h; use dist.comm = auto or mpi)");
  return CommPlan::kNccl;
}

NcclVersion nccl_version_decode(int code) {
  // NCCL_VERSION(X, Y, Z) in nccl.h: X * 1000 + Y * 100 + Z up to 2.8, X * 10000 + Y * 100 + Z
  // from 2.9 (whose minor needs two digits).
  NcclVersion v;
  if (code >= 10000) {
    v.major = code / 10000;
    v.minor = (code % 10000) / 100;
  } else {
    v.major = code / 1000;
    v.minor = (code % 1000) / 100;
  }
  v.patch = code % 100;
  return v;
}

std::string nccl_version_text(int code) {
  const NcclVersion v = nccl_version_decode(code);
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

std::string nccl_version_check(int code, int compiled_major) {
  if (code <= 0) return error_message("ncclGetVersion returned ", code, " (not a version)");
  const NcclVersion v = nccl_version_decode(code);
  if (v.major == compiled_major) return "";
  return error_message("NCCL ", nccl_version_text(code), " has major version ", v.major,
                       " but ledgerlm was compiled against NCCL ", compiled_major,
                       ".x (its structures and calls may differ)");
}

const std::vector<const char*>& nccl_symbols() {
  static const std::vector<const char*> symbols = {
      "ncclGetVersion",   "ncclGetUniqueId",  "ncclCommInitRankConfig", "ncclCommGetAsyncError",
      "ncclCommAbort",    "ncclCommFinalize", "ncclCommDestroy",        "ncclGetErrorString",
      "ncclGetLastError", "ncclAllReduce",    "ncclReduceScatter",      "ncclAllGather",
      "ncclSend",         "ncclRecv",         "ncclGroupStart",         "ncclGroupEnd",
  };
  return symbols;
}

std::vector<std::string> nccl_library_names() {
  const char* env = std::getenv("LEDGERLM_NCCL_LIBRARY");
  if (env != nullptr && *env != '\0') return {env};
  return {"libnccl.so.2"};
}

std::unique_ptr<SharedLibrary> nccl_library_open(const std::vector<std::string>& names,
                                                 int compiled_major, std::string* why,
                                                 int* version) {
  std::string reason;
  std::unique_ptr<SharedLibrary> lib = SharedLibrary::open(names, &reason);
  if (lib == nullptr) {
    *why = "NCCL did not load (" + reason + ")";
    return nullptr;
  }
  for (const char* symbol : nccl_symbols()) {
    if (lib->find(symbol, &reason) == nullptr) {
      *why = "NCCL at " + lib->path() + " is unusable: " + reason;
      return nullptr;
    }
  }
  // ncclResult_t ncclGetVersion(int*): the enum is an int in the C ABI.
  using GetVersion = int (*)(int*);
  int code = 0;
  const int rc = lib->function<GetVersion>("ncclGetVersion", &reason)(&code);
  if (rc != 0) {
    *why = error_message("NCCL at ", lib->path(), ": ncclGetVersion failed (result ", rc, ")");
    return nullptr;
  }
  const std::string bad = nccl_version_check(code, compiled_major);
  if (!bad.empty()) {
    *why = bad + " (" + lib->path() + ")";
    return nullptr;
  }
  if (version != nullptr) *version = code;
  return lib;
}

#if !defined(LEDGERLM_HAVE_NCCL)
bool comm_nccl_built() {
  return false;
}
std::unique_ptr<Comm> comm_create_nccl(Comm& host, Backend& be, std::string* why) {
  (void)host;
  (void)be;
  *why = "this build of ledgerlm has no NCCL Comm (it needs a CUDA build that found nccl.h)";
  return nullptr;
}
#endif

Comm& comm_for_run(const std::string& asked, const std::string& device, Comm& host, Backend& be,
                   std::unique_ptr<Comm>* owned) {
  const CommPlan plan = comm_choose(asked, device, host.world(), comm_nccl_built());
  if (plan == CommPlan::kHost) return host;
  std::string why;
  *owned = comm_create_nccl(host, be, &why);
  if (*owned) return **owned;
  LLM_REQUIRE(plan != CommPlan::kNccl, "dist.comm = nccl: ", why);
  if (host.rank() == 0)
    std::printf("dist.comm = auto: %s for device tensors (%s)\n", host.name().c_str(), why.c_str());
  return host;
}

}  // namespace ledgerlm
