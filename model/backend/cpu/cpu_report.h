// What the CPU backend runs on, for `ledgerlm bench` and the run records of `ledgerlm train`:
// the CPU model and flags, the path (cpu_isa.h) and where it came from, each op's kernels for
// a given model shape, and the GEMM libraries.
#pragma once

#include <cstdint>
#include <string>

#include "model/backend/cpu/cpu_isa.h"

namespace ledgerlm::cpu {

struct CpuReport {
  std::string cpu;      // "AMD EPYC | flags avx2 fma f16c avx512f avx512_bf16"
  std::string path;     // "avx512 (best for this CPU)" or "avx2 (LEDGERLM_CPU_ISA)"
  std::string kernels;  // the path of every op, e.g. "gelu avx512 | layernorm avx512 | ..."
  std::string gemm;     // cpu_gemm_lib_report
};

// For a model whose attention heads have `head_dim` channels; bf16_matmul: precision.matmul.
CpuReport cpu_report(CpuIsa isa, int64_t head_dim, bool bf16_matmul);

}  // namespace ledgerlm::cpu
