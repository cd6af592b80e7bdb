// Flush-to-zero / denormals-are-zero per thread (see subnormals.h).
#include "model/base/subnormals.h"

#include <atomic>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace ledgerlm {
namespace {

std::atomic<bool> g_flush{true};

#if defined(__x86_64__) || defined(__i386__)
constexpr unsigned kFtz = 1u << 15;  // MXCSR.FZ: subnormal results become 0
constexpr unsigned kDaz = 1u << 6;   // MXCSR.DAZ: subnormal inputs read as 0
#elif defined(__aarch64__)
constexpr uint64_t kFz = uint64_t{1} << 24;  // FPCR.FZ: both, for single and double precision
uint64_t read_fpcr() {
  uint64_t v;
  __asm__ __volatile__("mrs %0, fpcr" : "=r"(v));
  return v;
}
void write_fpcr(uint64_t v) {
  __asm__ __volatile__("msr fpcr, %0" : : "r"(v));
}
#endif

}  // namespace

bool subnormals_supported() {
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  return true;
#else
  return false;
#endif
}

void subnormals_set_thread(bool flush) {
#if defined(__x86_64__) || defined(__i386__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(flush ? (csr | kFtz | kDaz) : (csr & ~(kFtz | kDaz)));
#elif defined(__aarch64__)
  const uint64_t fpcr = read_fpcr();
  write_fpcr(flush ? (fpcr | kFz) : (fpcr & ~kFz));
#else
  (void)flush;
#endif
}

bool subnormals_thread_flushes() {
#if defined(__x86_64__) || defined(__i386__)
  return (_mm_getcsr() & (kFtz | kDaz)) == (kFtz | kDaz);
#elif defined(__aarch64__)
  return (read_fpcr() & kFz) != 0;
#else
  return false;
#endif
}

void subnormals_set_process(bool flush) {
  g_flush.store(flush);
  subnormals_set_thread(flush);
}

bool subnormals_process_flush() {
  return g_flush.load();
}

void subnormals_adopt() {
  subnormals_set_thread(g_flush.load());
}

}  // namespace ledgerlm
