// fp32 GEMM library choice and calls (see cpu_gemm_lib.h).
//
// Both libraries run on the same OpenMP runtime (libgomp) as the rest of the backend. OpenBLAS's
// thread count is process-wide, and oneDNN reads omp_get_max_threads() per call: both are set to
// the calling backend's count before each GEMM, so several backends with different thread
// counts in one process (tests) each get their own.
#include "model/backend/cpu/cpu_gemm_lib.h"

#include <cblas.h>
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

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

void set_threads(int threads) {
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

// LEDGERLM_CPU_GEMM = openblas | onednn forces one library for every fp32 GEMM (measurements
// side by side in the step); auto or unset: the rule below. -1 for auto, else the GemmLib.
int gemm_lib_forced() {
  static const int forced = [] {
    const char* env = std::getenv("LEDGERLM_CPU_GEMM");
    if (env == nullptr || *env == '\0' || std::string(env) == "auto") return -1;
    LLM_REQUIRE(std::string(env) == "openblas" || std::string(env) == "onednn",
                "LEDGERLM_CPU_GEMM: expected auto, openblas or onednn, got '", env, "'");
    LLM_REQUIRE(std::string(env) == "openblas" || cpu_have_onednn(),
                "LEDGERLM_CPU_GEMM=onednn: this build has no oneDNN (install libdnnl-dev)");
    return std::string(env) == "onednn" ? 1 : 0;
  }();
  return forced;
}

}  // namespace

const char* gemm_lib_name(GemmLib lib) {
  return lib == GemmLib::kOneDnn ? "oneDNN" : "OpenBLAS";
}

bool cpu_have_onednn() {
  return LEDGERLM_HAVE_DNNL != 0;
}

GemmLib cpu_gemm_lib_choose(CpuIsa isa, int64_t m, int64_t n, int64_t k, bool trans_a,
                            bool trans_b) {
  (void)m, (void)n, (void)k, (void)trans_a, (void)trans_b;
  const int forced = gemm_lib_forced();
  if (forced >= 0) return forced == 1 ? GemmLib::kOneDnn : GemmLib::kOpenBlas;
  if (!cpu_have_onednn() || isa == CpuIsa::kPortable) return GemmLib::kOpenBlas;
  // Until measured side by side on the step's shapes: OpenBLAS.
  return GemmLib::kOpenBlas;
}

void cpu_sgemm(GemmLib lib, int threads, bool trans_a, bool trans_b, int64_t m, int64_t n,
               int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float beta,
               float* c, int64_t ldc) {
  set_threads(threads);
#if LEDGERLM_HAVE_DNNL
  if (lib == GemmLib::kOneDnn) {
    const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a,
                                        lda, b, ldb, beta, c, ldc);
    LLM_ASSERT(st == dnnl_success, "dnnl_sgemm failed with status ", static_cast<int>(st));
    return;
  }
#else
  (void)lib;
#endif
  if (openblas_get_num_threads() != threads) openblas_set_num_threads(threads);
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta,
              c, static_cast<int>(ldc));
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
  if (cpu_gemm_lib_choose(isa, 1024, 1024, 1024, false, false) == GemmLib::kOpenBlas)
    return "fp32 and fp64: " + blas + (cpu_have_onednn() ? "" : " (built without oneDNN)");
  std::string dnnl = "oneDNN";
#if LEDGERLM_HAVE_DNNL
  const dnnl_version_t* v = dnnl_version();
  char buf[96];
  std::snprintf(buf, sizeof buf, "oneDNN %d.%d.%d (kernels %s)", v->major, v->minor, v->patch,
                dnnl_isa_name(dnnl_get_effective_cpu_isa()));
  dnnl = buf;
#endif
  return "fp32: " + dnnl + " | fp64 and BLAS-path attention products: " + blas;
}

}  // namespace ledgerlm::cpu
