// The CPU backend's report (see cpu_report.h).
#include "model/backend/cpu/cpu_report.h"

#include <cstdlib>

#include "model/backend/cpu/cpu_gemm_bf16.h"
#include "model/backend/cpu/cpu_gemm_lib.h"
#include "model/backend/cpu/cpu_kernels.h"

namespace ledgerlm::cpu {

CpuReport cpu_report(CpuIsa isa, int64_t head_dim, bool bf16_matmul) {
  CpuReport r;
  r.cpu = cpu_model_name() + " | flags " + cpu_isa_flags();
  const char* env = std::getenv("LEDGERLM_CPU_ISA");
  const bool forced = env != nullptr && *env != '\0';
  r.path = std::string(cpu_isa_name(isa)) +
           (forced ? " (LEDGERLM_CPU_ISA)"
                   : (isa == cpu_isa_best() ? " (best for this CPU)" : " (chosen by the caller)"));
  const std::string name = cpu_isa_name(isa);
  const CpuKernels& k = cpu_kernels(isa);
  const std::string attention =
      k.attention_vector(head_dim)
          ? name + " block products (head_dim " + std::to_string(head_dim) + ")"
          : "BLAS block products (head_dim " + std::to_string(head_dim) +
                (isa == CpuIsa::kPortable ? ")"
                                          : ", not a multiple of " + std::to_string(k.lanes) + ")");
  r.kernels = "gelu " + name + " | layernorm " + name + " | softmax cross-entropy " + name +
              " | bf16/fp16 casts " + name + " | attention " + attention;
  if (bf16_matmul)
    r.kernels += std::string(" | matmul bf16 ") +
                 (cpu_bf16_dot_used(isa) ? "VDPBF16PS kernel" : "rounded operands on sgemm");
  r.gemm = cpu_gemm_lib_report(isa);
  return r;
}

}  // namespace ledgerlm::cpu
