// precision.attention's checks and resolution (see attention_choice.h).
#include "train/config/attention_choice.h"

#include "model/base/check.h"

namespace ledgerlm {

void attention_config_check(const std::string& attention, const std::string& device,
                            const std::string& matmul, double dropout) {
  LLM_REQUIRE(attention == "auto" || attention == "cudnn" || attention == "own",
              "precision.attention: expected one of auto, cudnn, own (got '", attention, "')");
  if (attention != "cudnn") return;
  LLM_REQUIRE(device != "cpu",
              "precision.attention = cudnn needs train.device = cuda (cuDNN runs on a GPU; "
              "train.device is cpu): use auto or own");
  LLM_REQUIRE(dropout == 0.0,
              "precision.attention = cudnn has no attention dropout (model.dropout "
              "is ",
              dropout, "): set model.dropout = 0, or precision.attention = own");
  LLM_REQUIRE(matmul == "bf16",
              "precision.attention = cudnn runs attention in bf16: it needs precision.matmul = "
              "bf16 (precision.matmul is ",
              matmul, "; fp32 and tf32 runs keep our own kernel)");
}

bool attention_needs_cudnn(const std::string& attention, const std::string& device,
                           const std::string& matmul, double dropout) {
  if (attention == "own" || device != "cuda") return false;
  if (attention == "cudnn") return true;
  return matmul == "bf16" && dropout == 0.0;
}

AttentionChoice attention_resolve(const std::string& attention, const std::string& device,
                                  const std::string& matmul, double dropout,
                                  const std::string& cudnn_problem,
                                  const std::string& cudnn_version) {
  AttentionChoice own{AttentionImpl::kOwn, "own", ""};
  if (!attention_needs_cudnn(attention, device, matmul, dropout)) return own;
  if (!cudnn_problem.empty()) {
    own.note = error_message("precision.attention = ", attention,
                             ": using our own attention kernel (", cudnn_problem, ")");
    return own;
  }
  return {AttentionImpl::kCudnn, "cudnn",
          error_message("precision.attention = ", attention, ": cuDNN fused attention (cuDNN ",
                        cudnn_version, ")")};
}

}  // namespace ledgerlm
