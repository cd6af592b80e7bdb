// CPU path selection (see cpu_isa.h): flags from the compiler's CPUID support, the override from
// LEDGERLM_CPU_ISA, and the CPU's model name for reports.
#include "model/backend/cpu/cpu_isa.h"

#include <cstdlib>
#include <fstream>

#include "model/base/check.h"

namespace ledgerlm::cpu {

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kPortable:
      return "portable";
  }
  return "?";
}

bool cpu_isa_parse(const std::string& text, CpuIsa* out) {
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kPortable}) {
    if (text == cpu_isa_name(isa)) {
      *out = isa;
      return true;
    }
  }
  return false;
}

bool cpu_isa_supported(CpuIsa isa) {
  // __builtin_cpu_supports also checks that the OS saves the wider registers (XCR0).
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                           __builtin_cpu_supports("f16c");
  static const bool avx512 =
      avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  switch (isa) {
    case CpuIsa::kAvx512:
      return avx512;
    case CpuIsa::kAvx2:
      return avx2;
    case CpuIsa::kPortable:
      return true;
  }
  return false;
}

CpuIsa cpu_isa_best() {
  if (cpu_isa_supported(CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (cpu_isa_supported(CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kPortable;
}

CpuIsa cpu_isa_default() {
  const char* env = std::getenv("LEDGERLM_CPU_ISA");
  if (env == nullptr || *env == '\0') return cpu_isa_best();
  CpuIsa isa;
  LLM_REQUIRE(cpu_isa_parse(env, &isa),
              "LEDGERLM_CPU_ISA: expected avx512, avx2 or portable, got '", env, "'");
  LLM_REQUIRE(cpu_isa_supported(isa), "LEDGERLM_CPU_ISA=", env, ": this CPU (", cpu_model_name(),
              "; flags: ", cpu_isa_flags(), ") cannot run the ", env, " path");
  return isa;
}

bool cpu_has_avx512_bf16() {
  static const bool has =
      cpu_isa_supported(CpuIsa::kAvx512) && __builtin_cpu_supports("avx512bf16");
  return has;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) break;
    const size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? "unknown CPU" : line.substr(start);
  }
  return "unknown CPU";
}

std::string cpu_isa_flags() {
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (!on) return;
    if (!s.empty()) s += ' ';
    s += name;
  };
  add(__builtin_cpu_supports("avx2"), "avx2");
  add(__builtin_cpu_supports("fma"), "fma");
  add(__builtin_cpu_supports("f16c"), "f16c");
  add(__builtin_cpu_supports("avx512f"), "avx512f");
  add(__builtin_cpu_supports("avx512bf16"), "avx512_bf16");
  return s.empty() ? "none of avx2/fma/f16c/avx512f" : s;
}

}  // namespace ledgerlm::cpu
