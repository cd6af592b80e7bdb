// The CPU backend's published facts (see cpu_facts.h): thin forwards to its internals.
#include "model/backends/cpu_facts.h"

#include "model/backend/cpu/cpu_backend.h"
#include "model/backend/cpu/cpu_gemm_bf16.h"
#include "model/backend/cpu/cpu_gemm_lib.h"
#include "model/backend/cpu/cpu_isa.h"
#include "model/backend/cpu/cpu_report.h"
#include "model/backend/cpu/cpu_subnormals.h"

namespace ledgerlm {

CpuBackendReport cpu_backend_report(int64_t head_dim, bool bf16_matmul) {
  const cpu::CpuReport r = cpu::cpu_report(cpu::cpu_isa_default(), head_dim, bf16_matmul);
  return {r.cpu, r.path, r.kernels, r.gemm};
}

std::string cpu_backend_path() {
  return cpu::cpu_isa_name(cpu::cpu_isa_default());
}

bool cpu_backend_bf16_path() {
  return cpu::cpu_isa_default() == cpu::CpuIsa::kAvx512 && cpu::cpu_has_avx512_bf16();
}

bool cpu_backend_bf16_dot() {
  return cpu::cpu_bf16_dot_used(cpu::cpu_isa_default());
}

int64_t cpu_backend_bf16_packed_a(int64_t m, int64_t k) {
  return cpu::cpu_gemm_bf16_packed_a(m, k);
}

int64_t cpu_backend_bf16_packed_b(int64_t n, int64_t k) {
  return cpu::cpu_gemm_bf16_packed_b(n, k);
}

std::string cpu_backend_gemm_library(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  return cpu::gemm_lib_name(
      cpu::cpu_gemm_lib_choose(cpu::cpu_isa_default(), m, n, k, trans_a, trans_b));
}

int64_t cpu_backend_gemm_workspace(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                   bool beta1) {
  return cpu::cpu_gemm_lib_workspace_bytes(cpu::cpu_isa_default(), trans_a, trans_b, m, n, k,
                                           beta1);
}

std::string cpu_backend_subnormals(int threads) {
  return cpu::cpu_subnormals_state(threads);
}

std::string cpu_backend_blas_coretype() {
  return cpu::cpu_blas_better_coretype();
}

}  // namespace ledgerlm
