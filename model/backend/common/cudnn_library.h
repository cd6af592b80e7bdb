// libcudnn opened at run time (never linked), with the version check that decides whether this
// process may use it: the binary starts without cuDNN and the attention falls back to our own
// kernel with one line naming why. Host code only (no CUDA or cuDNN headers), so the loader and
// its checks build and are tested on machines without a GPU or a CUDA toolkit.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "model/base/shared_library.h"

namespace ledgerlm {

// The cuDNN major version the frontend code is compiled against (the CUDA build checks it
// against CUDNN_MAJOR): a library of another major has another ABI.
constexpr int kCudnnMajor = 9;
// The oldest cuDNN whose SDPA backward has the deterministic algorithm on our targets (sm_80,
// sm_90): from 9.0.0 the frontend serves set_deterministic_algorithm with the dP-workspace
// engine (before, a size-limited heuristic chose it). Blackwell needs 9.18.0 and dropout-free
// graphs; the frontend refuses the graph there and the run falls back with its message.
constexpr size_t kCudnnMinVersion = 90000;
// The library names tried, in order, unless LEDGERLM_CUDNN_LIBRARY names one file.
inline const char* const kCudnnSonames[] = {"libcudnn.so.9"};

// cudnnGetVersion()'s value (major * 10000 + minor * 100 + patch since cuDNN 9) as "9.19.0".
std::string cudnn_version_text(size_t version);
// "" when a library reporting `version` may run the cuDNN attention, else why not (wrong major:
// another ABI than the one compiled against; older than kCudnnMinVersion).
std::string cudnn_version_problem(size_t version);

// The outcome of loading libcudnn: the library and its version, or why not.
struct CudnnLoad {
  std::unique_ptr<SharedLibrary> library;  // null when unusable
  size_t version = 0;                      // cudnnGetVersion(), 0 when not read
  std::string why;                         // empty when usable
  bool ok() const { return library != nullptr; }
};

// Opens the first of `names` that loads, reads cudnnGetVersion (needs no GPU) and checks it.
// Never throws: every failure is in `why`.
CudnnLoad cudnn_load_from(const std::vector<std::string>& names);
// The names to try: $LEDGERLM_CUDNN_LIBRARY alone when set (a path or a soname), else
// kCudnnSonames.
std::vector<std::string> cudnn_library_names();
// The process's libcudnn, loaded on first call from cudnn_library_names() and kept until exit
// (the frontend's symbol look-ups go through its handle).
const CudnnLoad& cudnn_library();

}  // namespace ledgerlm
