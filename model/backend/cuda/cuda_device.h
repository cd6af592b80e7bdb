// CUDA device discovery, a bf16 cast round trip, and the CUDA backend's constructor: the header
// host code outside model/backend/cuda includes (no CUDA headers needed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace ledgerlm {

// Number of usable CUDA devices (0 when there is no driver or no GPU).
int cuda_device_count();
// "NVIDIA H200 (sm_90, 139.8 GiB)" or an explanation why there is none.
std::string cuda_device_description(int device);
// Round-trips n floats through device memory, converting to bf16 and back on the GPU; returns
// false when no device is available. Used by the cuda-labelled test.
bool cuda_bf16_roundtrip(const float* in, float* out, int64_t n);

class Backend;
// The CUDA backend on `device` (model/backend/cuda/cuda_backend.h); an Error when no such device
// is visible. backend_create("cuda") calls it.
std::unique_ptr<Backend> backend_create_cuda(int device);

}  // namespace ledgerlm
