// precision.attention: which attention implementation a run uses (auto | cudnn | own), its
// refusals and its resolution, as pure functions of the settings involved and of whether
// cuDNN can be used, so each rule is tested without a GPU. The run records the resolved value
// (cudnn | own), as it records the device instead of "auto".
#pragma once

#include <string>

#include "model/backend/backend.h"

namespace ledgerlm {

// Refuses precision.attention values the run cannot honour, one line naming the keys: an
// unknown value; cudnn with train.device = cpu (cuDNN runs on a GPU), with model.dropout > 0
// (the cuDNN path has no dropout that matches ours), or with precision.matmul other than bf16
// (cuDNN's attention reads and writes bf16; fp32 and tf32 runs keep our kernel). train.device =
// auto passes: the check runs again once the device is resolved.
void attention_config_check(const std::string& attention, const std::string& device,
                            const std::string& matmul, double dropout);

// The resolved choice and the line that says so (empty when there is nothing to say).
struct AttentionChoice {
  AttentionImpl impl = AttentionImpl::kOwn;
  std::string value;  // "cudnn" | "own": what the run records as precision.attention
  std::string note;   // one line for the log, or ""
};

// Resolves precision.attention after attention_config_check passed, for a resolved device.
// `cudnn_problem` is "" when cuDNN's attention can run in this process (built, library loaded,
// version accepted: backend_cudnn_attention_problem()), else why not; `cudnn_version` names the
// library for the note. auto: cudnn exactly when device = cuda, matmul = bf16, dropout = 0 and
// cuDNN is usable; else own (a note only where cuDNN was a candidate). cudnn: cudnn, or own
// with a note naming why when cuDNN is unusable. own: own.
AttentionChoice attention_resolve(const std::string& attention, const std::string& device,
                                  const std::string& matmul, double dropout,
                                  const std::string& cudnn_problem,
                                  const std::string& cudnn_version);

// Whether resolving `attention` on `device` with `matmul` and `dropout` needs to know about
// cuDNN at all (so CPU runs never load it).
bool attention_needs_cudnn(const std::string& attention, const std::string& device,
                           const std::string& matmul, double dropout);

}  // namespace ledgerlm
