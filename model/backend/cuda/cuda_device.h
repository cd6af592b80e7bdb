// CUDA device discovery and the first device kernels (precision casts). The full CUDA backend
// (cuBLASLt GEMMs, attention, fused optimizer kernels) implements backend.h on top of these.
#pragma once

#include <cstdint>
#include <string>

namespace ledgerlm {

// Number of usable CUDA devices (0 when there is no driver or no GPU).
int cuda_device_count();
// "NVIDIA H200 (sm_90, 139.8 GiB)" or an explanation why there is none.
std::string cuda_device_description(int device);
// Round-trips n floats through device memory, converting to bf16 and back on the GPU; returns
// false when no device is available. Used by the cuda-labelled test.
bool cuda_bf16_roundtrip(const float* in, float* out, int64_t n);

}  // namespace ledgerlm
