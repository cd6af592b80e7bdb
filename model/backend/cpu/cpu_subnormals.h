// precision.subnormals on the CPU backend's threads (model/base/subnormals.h). The backend's
// kernels, OpenBLAS (its OpenMP build) and oneDNN (built on OpenMP) all run on the calling
// thread's OpenMP pool, whose threads keep whatever floating-point mode they had when they
// started: one parallel region in which every thread adopts the process mode reaches all of
// them, and threads the pool starts later copy the mode of the thread that starts them.
#pragma once

#include <string>

namespace ledgerlm::cpu {

// The calling thread and every thread of a `threads`-thread OpenMP team to the process mode.
void cpu_subnormals_apply(int threads);

// What a `threads`-thread team (the calling thread its thread 0) does now: "flush", "keep", or
// "mixed (K of N threads flush)"; "keep (no flush-to-zero control on this CPU)" elsewhere.
std::string cpu_subnormals_state(int threads);

}  // namespace ledgerlm::cpu
