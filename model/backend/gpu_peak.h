// Datasheet peak arithmetic rates of NVIDIA GPUs, by the device name the CUDA runtime reports
// (cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3"): the denominator of `ledgerlm bench`'s
// MFU on a GPU, where no register-loop measurement like the CPU's (peak_flops.h) is possible.
// Dense rates (NVIDIA's datasheets quote tensor-core rates "with sparsity": half of those),
// bf16 and tf32 with fp32 accumulation, and the non-tensor fp32 rate. A pure table lookup.
#pragma once

#include <string>
#include <string_view>

namespace ledgerlm {

struct GpuPeak {
  std::string model;         // the table entry matched, e.g. "H100 SXM"; empty: not in the table
  double bf16_tflops = 0.0;  // dense bf16 tensor cores, fp32 accumulation
  double tf32_tflops = 0.0;  // dense tf32 tensor cores
  double fp32_tflops = 0.0;  // fp32 on the CUDA cores (no tensor cores)
  bool known() const { return !model.empty(); }
};

// The entry for `device_name`: its words (split at spaces and '-') must hold an entry's words
// in a row, so "A100" matches "NVIDIA A100-SXM4-80GB" but not "A10", and "H200" does not match
// "GH200". Unknown devices give an empty GpuPeak.
GpuPeak gpu_peak_for(std::string_view device_name);

// The peak the linear layers' GEMMs run at under precision.matmul = `matmul`: bf16 -> bf16,
// tf32 -> tf32, fp32 -> fp32 (CUBLAS_COMPUTE_32F uses no tensor cores). 0 when unknown.
double gpu_peak_tflops(const GpuPeak& peak, std::string_view matmul);

}  // namespace ledgerlm
