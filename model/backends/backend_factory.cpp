// The backend factory (backend_factory.h). A backend added to the build registers here.
#include "model/backends/backend_factory.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "model/backend/backend.h"
#include "model/backend/common/cudnn_library.h"
#include "model/backend/guard/guard_backend.h"
#include "model/backend/wrap/subnormal_count_backend.h"
#include "model/base/check.h"
#ifdef LEDGERLM_HAVE_CUDA
#include "model/backend/cuda/cuda_device.h"
#endif

namespace ledgerlm {

std::string backend_names() {
#ifdef LEDGERLM_HAVE_CUDA
  return "cpu, cuda";
#else
  return "cpu";
#endif
}

std::string backend_cudnn_attention_problem() {
#if defined(LEDGERLM_HAVE_CUDA) && defined(LEDGERLM_HAVE_CUDNN_ATTENTION)
  const CudnnLoad& load = cudnn_library();
  return load.ok() ? std::string() : load.why;
#elif defined(LEDGERLM_HAVE_CUDA)
  return "this build has no cuDNN attention: the cuDNN frontend headers were not found when it "
         "was configured (scripts/setup.sh fetches them; CMake: LEDGERLM_CUDNN_FRONTEND_INCLUDE)";
#else
  return "this build has no CUDA backend";
#endif
}

std::string backend_resolve(const std::string& name) {
  if (name != "auto") return name;
#ifdef LEDGERLM_HAVE_CUDA
  if (cuda_device_count() > 0) return "cuda";
#endif
  return "cpu";
}

namespace {

std::unique_ptr<Backend> backend_create_named(const std::string& name,
                                              const BackendOptions& options) {
  // Test hook (guard_backend.h): the CPU backend behind guarded memory.
  const char* guard = std::getenv("LEDGERLM_TEST_GUARD_BACKEND");
  if (name == "guard" || (name == "cpu" && guard != nullptr && std::strcmp(guard, "1") == 0))
    return backend_create_guard(options.threads);
  if (name == "cpu") return backend_create_cpu(options.threads);
#ifdef LEDGERLM_HAVE_CUDA
  if (name == "cuda") return backend_create_cuda(options.device);
#endif
  fail(error_message("backend '", name,
                     "' is not available in this build (choices: ", backend_names(), ")"));
}

}  // namespace

std::unique_ptr<Backend> backend_create(const std::string& name, const BackendOptions& options) {
  std::unique_ptr<Backend> backend = backend_create_named(name, options);
  // Test hook (subnormal_count_backend.h): subnormal counts per op output, printed at the end.
  const char* count = std::getenv("LEDGERLM_TEST_COUNT_SUBNORMALS");
  if (count != nullptr && std::strcmp(count, "1") == 0)
    return std::make_unique<SubnormalCountBackend>(std::move(backend), true);
  return backend;
}

}  // namespace ledgerlm
