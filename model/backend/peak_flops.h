// Measured peak arithmetic rate of this machine (for MFU): a register-resident FMA loop on every
// thread, AVX-512 on the avx512 path (cpu_isa.h), AVX2/FMA otherwise; and the bf16
// dot-product rate (VDPBF16PS) on the avx512 path of a CPU with AVX-512 BF16.
#pragma once

namespace ledgerlm {

struct PeakFlops {
  double fp32_gflops = 0.0;  // all threads
  double bf16_gflops = 0.0;  // 0 when the CPU lacks AVX-512 BF16
  const char* fp32_isa = "";
};

PeakFlops measure_peak_flops(int threads, double seconds = 0.3);

}  // namespace ledgerlm
