// Which library runs an fp32 GEMM of the CPU backend: OpenBLAS (cblas_sgemm, always linked) or
// oneDNN (dnnl_sgemm, its own row-major API; optional, present when the build found libdnnl).
// The choice is a pure function of the path (CPU flags) and the shape, never of timings, so a
// run's results stay deterministic per (threads, path); tests/bench/bench_gemm_libs.cpp measured
// the libraries (and BLIS) side by side on the training step's shapes, and the README's
// Benchmarks section gives the figures the rule follows.
#pragma once

#include <cstdint>
#include <string>

#include "model/backend/cpu/cpu_isa.h"

namespace ledgerlm::cpu {

enum class GemmLib : uint8_t { kOpenBlas, kOneDnn };

const char* gemm_lib_name(GemmLib lib);  // "OpenBLAS", "oneDNN"

// True when this build links oneDNN.
bool cpu_have_onednn();

// The library for C[m,n] = op(A) op(B) in fp32 on path `isa`.
GemmLib cpu_gemm_lib_choose(CpuIsa isa, int64_t m, int64_t n, int64_t k, bool trans_a,
                            bool trans_b);

// Row-major C = op(A) op(B) + beta C on `lib` with `threads` threads (lda/ldb/ldc as in CBLAS).
void cpu_sgemm(GemmLib lib, int threads, bool trans_a, bool trans_b, int64_t m, int64_t n,
               int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc);

// Caps oneDNN's kernels at the path's ISA (avx2 on an AVX-512 CPU runs oneDNN's AVX2 kernels):
// process-wide and effective only before oneDNN's first GEMM, so the first backend decides.
void cpu_gemm_lib_init(CpuIsa isa);

// One line for reports: the libraries, their versions and kernel sets, and the rule, e.g.
// "fp32 oneDNN 2.6.3 (kernels avx512_core_bf16) | fp64, portable attention: OpenBLAS 0.3.21
// (core Cooperlake)".
std::string cpu_gemm_lib_report(CpuIsa isa);

}  // namespace ledgerlm::cpu
