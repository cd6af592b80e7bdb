// cuDNN's fused causal attention (SDPA) behind the CUDA backend's attention_forward/backward
// when AttentionArgs::impl is kCudnn (precision.attention = cudnn). Declared without cuDNN or
// frontend headers; the implementation (cudnn_attention.cpp, host C++) is compiled only
// when CMake found the cuDNN frontend headers (LEDGERLM_HAVE_CUDNN_ATTENTION).
//
// Our activations are fp32: the fused qkv [B,T,W] (W = 3C, or C + 2 KV hd with grouped-query
// attention, AttentionArgs::kv_heads = KV) is converted to bf16 and cuDNN reads q, k and v from
// it by strides (dims [B,H,T,hd] for q, [B,KV,T,hd] for k and v, strides [T*W, hd, W, 1]: cuDNN's
// SDPA lets query head h read kv head h / (H / KV) and sums dk, dv over a group itself); O
// comes back in bf16 ([B,T,C] by strides) and is widened into `out`; Stats (fp32 [B,H,T]) is
// written straight into `lse`: cuDNN's Stats is the natural-log log-sum-exp of the scaled
// scores, max included, which is our kernel's lse too. Backward converts dout and out to bf16
// (out's bf16 round trip is exact, so cuDNN sees the O it wrote), and widens dq, dk, dv into
// dqkv. Scale 1/sqrt(hd), no dropout, the deterministic backward algorithm. A shape is decided
// once: both graphs build, or that shape runs our kernel forward and backward (one line says
// why), so a cuDNN forward is never paired with our backward or the reverse. That is also the
// fallback for grouped-query shapes a cuDNN version or GPU does not take (the frontend's support
// check decides, e.g. for the deterministic backward with fewer K/V heads): our kernel runs
// them.
#pragma once

#include <cstdint>
#include <memory>

#include "model/backend/backend.h"

namespace ledgerlm::cuda {

class CudaBackend;

class CudnnAttention {
 public:
  virtual ~CudnnAttention() = default;
  // false: this shape runs our kernel (the reason was printed once); true: done on cuDNN.
  virtual bool forward(Tensor out, Tensor lse, Tensor qkv, const AttentionArgs& args) = 0;
  virtual bool backward(Tensor dqkv, Tensor dout, Tensor qkv, Tensor out, Tensor lse,
                        const AttentionArgs& args) = 0;
  // Forward and backward calls cuDNN ran (tests check the path was taken).
  virtual int64_t calls() const = 0;
};

// A cuDNN attention for `backend` (its stream, its tracked workspace), or an Error naming why
// none can be made (no cuDNN attention in this build, libcudnn unusable).
std::unique_ptr<CudnnAttention> cudnn_attention_create(CudaBackend& backend);

}  // namespace ledgerlm::cuda
