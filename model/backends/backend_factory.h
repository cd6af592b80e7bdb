// The backend factory: a backend by name, so that the trainer, bench, eval and sample choose it
// from configuration (train.device) instead of naming a concrete class. It sits in a room above
// every backend (model/backend/cpu, cuda, guard), which it names; the backends include only the
// interface below them (model/backend/backend.h), so no room includes its way back up.
#pragma once

#include <memory>
#include <string>

#include "model/backend/backend.h"

namespace ledgerlm {

// The backend called `name` ("cpu"; "cuda" in builds with the CUDA backend); an unknown or
// unavailable name is an Error naming it and the choices.
std::unique_ptr<Backend> backend_create(const std::string& name,
                                        const BackendOptions& options = {});
// train.device resolved: "auto" is "cuda" when this build has the CUDA backend and a CUDA device
// is visible, else "cpu"; any other name is returned as it is.
std::string backend_resolve(const std::string& name);
// Names backend_create accepts in this build.
std::string backend_names();
// "" when this process can run precision.attention = cudnn (a CUDA build with the cuDNN
// attention compiled in, libcudnn loaded and its version accepted: cudnn_library.h), else why
// not, in words for the one fallback line. Loads libcudnn on the first call.
std::string backend_cudnn_attention_problem();

}  // namespace ledgerlm
