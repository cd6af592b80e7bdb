// fp32 GEMM library choice, set-up and report (see cpu_gemm_lib.h); the calls themselves are
// CpuBackend::gemm's (cpu_gemm.cpp), on the backend's threads and workspace.
#include "model/backend/cpu/cpu_gemm_lib.h"

#include <cblas.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "model/backend/cpu/cpu_onednn.h"
#include "model/base/check.h"

#if LEDGERLM_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

namespace ledgerlm::cpu {
namespace {

#if LEDGERLM_HAVE_DNNL
const char* dnnl_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "other";
  }
}
#endif

// LEDGERLM_CPU_GEMM (cpu_gemm_lib.h): -1 for auto, else the forced GemmLib.
int gemm_lib_forced() {
  static const int forced = [] {
    const char* env = std::getenv("LEDGERLM_CPU_GEMM");
    const std::string v = env ? env : "";
    if (v.empty() || v == "auto") return -1;
    const int lib = v == "openblas" ? 0 : v == "onednn" ? 1 : v == "onednn-sgemm" ? 2 : -2;
    LLM_REQUIRE(lib >= 0,
                "LEDGERLM_CPU_GEMM: expected auto, openblas, onednn or onednn-sgemm, got '", v,
                "'");
    LLM_REQUIRE(lib == 0 || cpu_have_onednn(), "LEDGERLM_CPU_GEMM=", v,
                ": this build has no oneDNN (install libdnnl-dev)");
    return lib;
  }();
  return forced;
}

}  // namespace

const char* gemm_lib_name(GemmLib lib) {
  switch (lib) {
    case GemmLib::kOneDnn:
      return "oneDNN matmul";
    case GemmLib::kOneDnnSgemm:
      return "oneDNN sgemm";
    case GemmLib::kOpenBlas:
      break;
  }
  return "OpenBLAS";
}

bool cpu_have_onednn() {
  return LEDGERLM_HAVE_DNNL != 0;
}

GemmLib cpu_gemm_lib_choose(CpuIsa isa, int64_t m, int64_t n, int64_t k, bool trans_a,
                            bool trans_b) {
  (void)k;
  const int forced = gemm_lib_forced();
  if (forced >= 0) return static_cast<GemmLib>(forced);
  if (!cpu_have_onednn() || isa == CpuIsa::kPortable) return GemmLib::kOpenBlas;
  // Measured on the training step's shapes (bench_tiny, bench_small; README, Benchmarks; an AMD
  // Zen 4, both paths). avx512: oneDNN's AVX-512 matmul beat OpenBLAS's AVX-512 (Cooperlake)
  // kernels on every shape, by 1.5x in total on bench_tiny and 9% on bench_small.
  if (isa == CpuIsa::kAvx512) return GemmLib::kOneDnn;
  // avx2 (oneDNN's AVX2 matmul against OpenBLAS's Haswell kernels): oneDNN won every
  // untransposed product (input gradients, 3-32%) and the products with a narrow output
  // (128 columns); OpenBLAS won the wider forward products (x W^T) and the weight gradients
  // (dout^T x) larger than 128 x 128, by 1-45%. On an AMD Zen 3 (AVX2 only) the same rule came
  // within 1-3.5% of the best library per shape (two runs of bench_small and bench_tiny), and
  // no simpler rule did better in both runs; BLIS's Zen 3 kernels were no faster there.
  if (!trans_a && !trans_b) return GemmLib::kOneDnn;
  if (trans_b) return n <= 128 ? GemmLib::kOneDnn : GemmLib::kOpenBlas;
  return m * n <= 128 * 128 ? GemmLib::kOneDnn : GemmLib::kOpenBlas;
}

int64_t cpu_gemm_lib_workspace_bytes(CpuIsa isa, bool trans_a, bool trans_b, int64_t m, int64_t n,
                                     int64_t k, bool beta1) {
  if (cpu_gemm_lib_choose(isa, m, n, k, trans_a, trans_b) != GemmLib::kOneDnn) return 0;
  return onednn_matmul_scratchpad_bytes(trans_a, trans_b, m, n, k, beta1);
}

void cpu_gemm_lib_init(CpuIsa isa) {
  (void)gemm_lib_forced();  // a bad LEDGERLM_CPU_GEMM fails here, before any GEMM
#if LEDGERLM_HAVE_DNNL
  static std::once_flag once;
  std::call_once(once, [isa] {
    // Fails (harmlessly) once oneDNN has run a kernel: the cap only applies before that.
    if (isa == CpuIsa::kAvx2) dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
  });
#else
  (void)isa;
#endif
}

std::string cpu_gemm_lib_report(CpuIsa isa) {
  const char* core = openblas_get_corename();
  std::string blas = std::string("OpenBLAS (core ") + (core ? core : "?") + ")";
  const GemmLib lib = cpu_gemm_lib_choose(isa, 1024, 1024, 1024, false, false);
  if (lib == GemmLib::kOpenBlas)
    return "fp32 and fp64: " + blas + (cpu_have_onednn() ? "" : " (built without oneDNN)");
  // The same library for every shape, or the avx2 rule above.
  const bool mixed = cpu_gemm_lib_choose(isa, 1024, 1024, 1024, true, false) != lib;
  std::string dnnl = gemm_lib_name(lib);
#if LEDGERLM_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s %d.%d.%d (kernels %s)", gemm_lib_name(lib), v->major, v->minor,
                v->patch, dnnl_isa_name(dnnl_get_effective_cpu_isa()));
  dnnl = buf;
#endif
  if (mixed)
    return "fp32: " + dnnl + " for x W (input gradients) and narrow x W^T / dout^T x, " + blas +
           " for the others | fp64 and BLAS-path attention products: " + blas;
  return "fp32: " + dnnl + " | fp64 and BLAS-path attention products: " + blas;
}

}  // namespace ledgerlm::cpu
