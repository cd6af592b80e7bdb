// Which library runs an fp32 GEMM of the CPU backend: OpenBLAS (cblas_sgemm, always linked) or
// oneDNN (optional, present when the build found libdnnl) through its own API: its matmul
// primitive (cpu_onednn.h: the scratchpad in the backend's tracked workspace), or, for
// measurements only, its dnnl_sgemm (packing buffers allocated outside the ledger).
// The choice is a pure function of the path (CPU flags) and the shape, never of timings, so a
// run's results stay deterministic per (threads, path); tests/bench/bench_gemm_libs.cpp measured
// the libraries (and BLIS) side by side on the training step's shapes, and the README's
// Benchmarks section gives the figures the rule follows. CpuBackend::gemm (cpu_gemm.cpp) makes
// the call on the library chosen here.
#pragma once

#include <cstdint>
#include <string>

#include "model/backend/cpu/cpu_isa.h"

namespace ledgerlm::cpu {

enum class GemmLib : uint8_t { kOpenBlas, kOneDnn, kOneDnnSgemm };

const char* gemm_lib_name(GemmLib lib);  // "OpenBLAS", "oneDNN matmul", "oneDNN sgemm"

// True when this build links oneDNN.
bool cpu_have_onednn();

// The library for C[m,n] = op(A) op(B) in fp32 on path `isa`.
GemmLib cpu_gemm_lib_choose(CpuIsa isa, int64_t m, int64_t n, int64_t k, bool trans_a,
                            bool trans_b);

// Workspace bytes (the kGemmLib slot) a GEMM of this shape takes on path `isa`: the oneDNN
// matmul primitive's scratchpad where that library runs it, else 0 (the memory planner's figure).
int64_t cpu_gemm_lib_workspace_bytes(CpuIsa isa, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                     int64_t k, bool beta1);

// Caps oneDNN's kernels at the path's ISA (avx2 on an AVX-512 CPU runs oneDNN's AVX2 kernels):
// process-wide and effective only before oneDNN's first GEMM, so the first backend decides.
void cpu_gemm_lib_init(CpuIsa isa);

// LEDGERLM_CPU_GEMM = auto | openblas | onednn | onednn-sgemm: auto (or unset) follows the rule;
// the others force one library for every fp32 GEMM (side-by-side measurements in the step).

// One line for reports: the libraries, their versions and kernel sets, and the rule, e.g.
// "fp32 oneDNN 2.6.3 (kernels avx512_core_bf16) | fp64, portable attention: OpenBLAS 0.3.21
// (core Cooperlake)".
std::string cpu_gemm_lib_report(CpuIsa isa);

}  // namespace ledgerlm::cpu
