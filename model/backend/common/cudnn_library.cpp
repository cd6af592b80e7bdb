// The cuDNN loader and its version check (see cudnn_library.h).
#include "model/backend/common/cudnn_library.h"

#include <cstdlib>

#include "model/base/check.h"

namespace ledgerlm {

std::string cudnn_version_text(size_t version) {
  return error_message(version / 10000, ".", version / 100 % 100, ".", version % 100);
}

std::string cudnn_version_problem(size_t version) {
  if (version / 10000 != static_cast<size_t>(kCudnnMajor))
    return error_message("cuDNN ", cudnn_version_text(version), " is not major version ",
                         kCudnnMajor, " (the one this build is compiled against)");
  if (version < kCudnnMinVersion)
    return error_message("cuDNN ", cudnn_version_text(version), " is older than ",
                         cudnn_version_text(kCudnnMinVersion),
                         " (the first with a deterministic SDPA backward)");
  return "";
}

CudnnLoad cudnn_load_from(const std::vector<std::string>& names) {
  CudnnLoad load;
  std::string why;
  std::unique_ptr<SharedLibrary> lib = SharedLibrary::open(names, &why);
  if (lib == nullptr) {
    load.why = "cuDNN not loaded: " + why;
    return load;
  }
  using GetVersion = size_t (*)();
  const GetVersion get_version = lib->function<GetVersion>("cudnnGetVersion", &why);
  if (get_version == nullptr) {
    load.why = "cuDNN library " + lib->path() + " unusable: " + why;
    return load;
  }
  load.version = get_version();
  const std::string problem = cudnn_version_problem(load.version);
  if (!problem.empty()) {
    load.why = problem + " (" + lib->path() + ")";
    return load;
  }
  load.library = std::move(lib);
  return load;
}

std::vector<std::string> cudnn_library_names() {
  const char* env = std::getenv("LEDGERLM_CUDNN_LIBRARY");
  if (env != nullptr && *env != '\0') return {env};
  return {std::begin(kCudnnSonames), std::end(kCudnnSonames)};
}

const CudnnLoad& cudnn_library() {
  // Loaded once: a second dlopen would be harmless, but the frontend keeps one handle and the
  // fallback line must not repeat per call.
  static const CudnnLoad load = cudnn_load_from(cudnn_library_names());
  return load;
}

}  // namespace ledgerlm
