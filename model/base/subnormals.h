// Flush-to-zero / denormals-are-zero (precision.subnormals). Subnormal floats (|x| < 2^-126 in
// fp32) take a microcode assist on many x86 CPUs (~100+ cycles per operation on Intel cores):
// a run whose attention saturates fills its backward with them and slows down 3-4x with the
// same arithmetic. Flushing them (outputs to 0: FTZ; inputs read as 0: DAZ) keeps the speed and
// changes values only below 2^-126.
//
// The setting is per thread (x86-64: MXCSR bits FTZ and DAZ; aarch64: FPCR.FZ, which does both
// for fp32/fp64). A thread starts with its creator's setting, so threads started after the
// setting inherit it, and threads already running do not. Hence a process-wide mode: whoever
// decides (the trainer, from its config, before its backend exists) sets it, the CPU backend
// applies it to every OpenMP thread (cpu_subnormals.h), and every thread we start ourselves
// adopts it first thing. Elsewhere (no such control) the mode is recorded and nothing flushes.
#pragma once

namespace ledgerlm {

// Whether this CPU architecture has the control (x86-64, aarch64).
bool subnormals_supported();

// The process-wide mode (true: flush; the default) and this thread set to it.
void subnormals_set_process(bool flush);
bool subnormals_process_flush();

// This thread set to the process-wide mode: the first call of every thread we start.
void subnormals_adopt();

// This thread's setting now: true when it flushes (both FTZ and DAZ on x86-64).
bool subnormals_thread_flushes();

// Sets this thread only (tests; everything else goes through the process mode).
void subnormals_set_thread(bool flush);

}  // namespace ledgerlm
