// precision.attention: each refusal (one line naming the keys), the config layer refusing before
// any backend is made, and the resolution of auto | cudnn | own as a pure function of the device,
// precision.matmul, model.dropout and whether cuDNN is usable. Runs in milliseconds.
#include "train/config/attention_choice.h"

#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_util.h"
#include "train/config/run_config.h"

namespace ledgerlm {
namespace {

using testing::error_of;

void expect_refused(const std::string& attention, const std::string& device,
                    const std::string& matmul, double dropout,
                    std::initializer_list<std::string> needles) {
  const std::string err =
      error_of([&] { attention_config_check(attention, device, matmul, dropout); });
  ASSERT_FALSE(err.empty()) << attention << " on " << device << " was not refused";
  EXPECT_EQ(err.find('\n'), std::string::npos) << "one line: " << err;
  for (const std::string& n : needles) EXPECT_NE(err.find(n), std::string::npos) << err;
}

TEST(AttentionChoice, RefusesWhatCannotRun) {
  expect_refused("flash", "cuda", "bf16", 0.0,
                 {"precision.attention", "auto, cudnn, own", "flash"});
  expect_refused("cudnn", "cpu", "bf16", 0.0, {"precision.attention = cudnn", "train.device"});
  expect_refused("cudnn", "cuda", "bf16", 0.1, {"model.dropout", "0.1"});
  expect_refused("cudnn", "cuda", "fp32", 0.0, {"precision.matmul = bf16", "fp32"});
  expect_refused("cudnn", "cuda", "tf32", 0.0, {"precision.matmul = bf16", "tf32"});
}

TEST(AttentionChoice, AcceptsWhatCanRun) {
  for (const char* device : {"cpu", "cuda", "auto"}) {
    EXPECT_EQ(error_of([&] { attention_config_check("auto", device, "fp32", 0.1); }), "");
    EXPECT_EQ(error_of([&] { attention_config_check("own", device, "bf16", 0.1); }), "");
  }
  EXPECT_EQ(error_of([] { attention_config_check("cudnn", "cuda", "bf16", 0.0); }), "");
  // train.device = auto is checked again once resolved.
  EXPECT_EQ(error_of([] { attention_config_check("cudnn", "auto", "bf16", 0.0); }), "");
}

TEST(AttentionChoice, ConfigValidateRefusesFirst) {
  RunConfig cfg;
  cfg.model.vocab_size = 256;
  cfg.train.max_steps = 1;
  cfg.precision.matmul = "bf16";
  cfg.precision.attention = "cudnn";
  cfg.train.device = "cpu";
  std::string err = error_of([&] { cfg.validate(); });
  EXPECT_NE(err.find("precision.attention = cudnn needs train.device = cuda"), std::string::npos)
      << err;
  cfg.precision.attention = "sdpa";
  err = error_of([&] { cfg.validate(); });
  EXPECT_NE(err.find("precision.attention: expected one of auto, cudnn, own"), std::string::npos)
      << err;
  cfg.precision.attention = "auto";
  EXPECT_EQ(error_of([&] { cfg.validate(); }), "");
}

TEST(AttentionChoice, AutoResolution) {
  const std::string none;  // cuDNN usable
  // Not a candidate: our kernel, silently (CPU runs, fp32 and tf32 runs, dropout).
  for (const auto& [device, matmul, dropout] :
       {std::tuple{"cpu", "bf16", 0.0}, std::tuple{"cuda", "fp32", 0.0},
        std::tuple{"cuda", "tf32", 0.0}, std::tuple{"cuda", "bf16", 0.1}}) {
    const AttentionChoice c = attention_resolve("auto", device, matmul, dropout, none, "9.19.0");
    EXPECT_EQ(c.impl, AttentionImpl::kOwn) << device << " " << matmul << " " << dropout;
    EXPECT_EQ(c.value, "own");
    EXPECT_EQ(c.note, "");
    EXPECT_FALSE(attention_needs_cudnn("auto", device, matmul, dropout));
  }
  // A candidate, cuDNN usable: cudnn, and the line names the library's version.
  EXPECT_TRUE(attention_needs_cudnn("auto", "cuda", "bf16", 0.0));
  AttentionChoice c = attention_resolve("auto", "cuda", "bf16", 0.0, none, "9.19.0");
  EXPECT_EQ(c.impl, AttentionImpl::kCudnn);
  EXPECT_EQ(c.value, "cudnn");
  EXPECT_NE(c.note.find("cuDNN 9.19.0"), std::string::npos) << c.note;
  // A candidate, cuDNN unusable: our kernel, one line naming why.
  c = attention_resolve("auto", "cuda", "bf16", 0.0, "cuDNN not loaded: /x/libcudnn.so.9", "");
  EXPECT_EQ(c.impl, AttentionImpl::kOwn);
  EXPECT_EQ(c.value, "own");
  EXPECT_NE(c.note.find("own attention kernel (cuDNN not loaded: /x/libcudnn.so.9)"),
            std::string::npos)
      << c.note;
}

TEST(AttentionChoice, ExplicitResolution) {
  AttentionChoice c = attention_resolve("cudnn", "cuda", "bf16", 0.0, "", "9.19.0");
  EXPECT_EQ(c.impl, AttentionImpl::kCudnn);
  c = attention_resolve("cudnn", "cuda", "bf16", 0.0, "this build has no cuDNN attention", "");
  EXPECT_EQ(c.impl, AttentionImpl::kOwn);
  EXPECT_NE(c.note.find("precision.attention = cudnn: using our own attention kernel (this build "
                        "has no cuDNN attention)"),
            std::string::npos)
      << c.note;
  for (const char* device : {"cpu", "cuda"}) {
    c = attention_resolve("own", device, "bf16", 0.0, "", "9.19.0");
    EXPECT_EQ(c.impl, AttentionImpl::kOwn);
    EXPECT_EQ(c.value, "own");
    EXPECT_EQ(c.note, "");
    EXPECT_FALSE(attention_needs_cudnn("own", device, "bf16", 0.0));
  }
}

}  // namespace
}  // namespace ledgerlm
