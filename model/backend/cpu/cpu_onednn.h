// oneDNN matmul primitives for the CPU backend's fp32 GEMMs (cpu_gemm_lib.h decides which GEMMs
// run here). One primitive per shape (m, n, k, transposes, beta), created on first use and kept:
// operands are described by strides (a transpose is a stride swap, nothing is copied), beta = 1
// is a sum post-op, and the scratchpad is user-managed, taken from the backend's tracked
// workspace, so the memory ledger sees every byte the GEMMs use (oneDNN's own sgemm allocates
// its packing buffers itself on every call, outside the ledger). Built only with oneDNN
// (LEDGERLM_HAVE_DNNL); without it, constructing one is an error.
#pragma once

#include <cstdint>
#include <memory>

namespace ledgerlm::cpu {

class OneDnnMatmuls {
 public:
  OneDnnMatmuls();
  ~OneDnnMatmuls();
  OneDnnMatmuls(const OneDnnMatmuls&) = delete;
  OneDnnMatmuls& operator=(const OneDnnMatmuls&) = delete;

  // Bytes of scratchpad the shape's primitive needs (creating the primitive if needed).
  int64_t scratchpad_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, bool beta1);

  // Row-major dense C[m,n] = op(A) op(B) (+ C when beta1) on `threads` threads, with
  // `scratch` of at least scratchpad_bytes(...) bytes.
  void run(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
           const float* b, bool beta1, float* c, void* scratch, int threads);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The scratchpad bytes of a shape without keeping a primitive (the memory planner's question);
// 0 without oneDNN.
int64_t onednn_matmul_scratchpad_bytes(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                                       bool beta1);

}  // namespace ledgerlm::cpu
