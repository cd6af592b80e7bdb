// Which vector instruction set the CPU backend's kernels run on, chosen once per backend from the
// CPU's flags (never from timings, so results stay deterministic per (threads, path)):
//   avx512    AVX-512 F/BW/VL/DQ + FMA + F16C (Skylake-X and later Xeons, AMD Zen 4)
//   avx2      AVX2 + FMA + F16C (Haswell and later, AMD Zen 1-3: most laptops and desktops)
//   portable  plain C++ loops the compiler vectorises for baseline x86-64 (any other CPU)
// The environment variable LEDGERLM_CPU_ISA = avx512 | avx2 | portable overrides the choice so
// one machine can run (and test) every path it supports; asking for a path the CPU cannot run is
// an error naming the CPU's flags.
#pragma once

#include <cstdint>
#include <string>

namespace ledgerlm::cpu {

enum class CpuIsa : uint8_t { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

const char* cpu_isa_name(CpuIsa isa);  // "portable", "avx2", "avx512"
// Parses a name cpu_isa_name returns; false for anything else.
bool cpu_isa_parse(const std::string& text, CpuIsa* out);

// True when this CPU (and OS) can run the kernels of `isa`.
bool cpu_isa_supported(CpuIsa isa);
// The widest path this CPU supports.
CpuIsa cpu_isa_best();
// The path a backend uses when none is given: LEDGERLM_CPU_ISA if set (an Error if it is not a
// path name or the CPU cannot run it), else cpu_isa_best().
CpuIsa cpu_isa_default();

// True when the CPU has AVX512_BF16 (VDPBF16PS); used only on the avx512 path.
bool cpu_has_avx512_bf16();

// "model name" of /proc/cpuinfo (or "unknown CPU"), and the vector flags that decide the path,
// e.g. "avx2 fma f16c avx512f avx512_bf16".
std::string cpu_model_name();
std::string cpu_isa_flags();

}  // namespace ledgerlm::cpu
