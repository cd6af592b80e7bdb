// run_resolve_attention with cuDNN unusable: LEDGERLM_CUDNN_LIBRARY names a file that does not
// exist, so a CUDA run asking for auto or cudnn falls back to our kernel with one line naming
// the file (in a build without the cuDNN attention, or without CUDA, the line names that
// instead); a CPU run never loads cuDNN and prints nothing. Its own executable: the process
// loads libcudnn once, and the variable must be set before. Runs in milliseconds.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "train/config/run_config.h"
#include "train/run/run_setup.h"

namespace ledgerlm {
namespace {

constexpr const char* kMissing = "/nonexistent/ledgerlm-test/libcudnn.so.9";

RunConfig cuda_bf16(const std::string& attention) {
  RunConfig cfg;
  cfg.train.device = "cuda";
  cfg.precision.matmul = "bf16";
  cfg.precision.attention = attention;
  return cfg;
}

std::string expected_reason() {
#if defined(LEDGERLM_HAVE_CUDNN_ATTENTION)
  return kMissing;
#elif defined(LEDGERLM_HAVE_CUDA)
  return "this build has no cuDNN attention";
#else
  return "this build has no CUDA backend";
#endif
}

TEST(AttentionFallback, MissingLibraryNamedInOneLine) {
  setenv("LEDGERLM_CUDNN_LIBRARY", kMissing, 1);
  for (const char* asked : {"auto", "cudnn"}) {
    RunConfig cfg = cuda_bf16(asked);
    ::testing::internal::CaptureStdout();
    run_resolve_attention(&cfg, true);
    const std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_EQ(cfg.precision.attention, "own") << asked;
    EXPECT_EQ(out.find('\n'), out.size() - 1) << "one line: " << out;
    EXPECT_NE(out.find(std::string("precision.attention = ") + asked +
                       ": using our own attention kernel"),
              std::string::npos)
        << out;
    EXPECT_NE(out.find(expected_reason()), std::string::npos) << out;
  }
  // A CPU run resolves auto to own without a word.
  RunConfig cfg;
  ::testing::internal::CaptureStdout();
  run_resolve_attention(&cfg, true);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
  EXPECT_EQ(cfg.precision.attention, "own");
  unsetenv("LEDGERLM_CUDNN_LIBRARY");
}

}  // namespace
}  // namespace ledgerlm
