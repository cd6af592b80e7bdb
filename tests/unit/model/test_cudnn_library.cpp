// The cuDNN loader (model/backend/common/cudnn_library.h): the version check as a pure function,
// the installed libcudnn found and accepted (skipped where none is installed), a missing file
// and a library without cudnnGetVersion refused with the reason, a library of another major
// version refused by the check, and LEDGERLM_CUDNN_LIBRARY naming the one file to try. No GPU
// needed: cudnnGetVersion runs without one. Runs in well under a second.
#include "model/backend/common/cudnn_library.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace ledgerlm {
namespace {

TEST(CudnnLibrary, VersionCheck) {
  EXPECT_EQ(cudnn_version_text(91900), "9.19.0");
  EXPECT_EQ(cudnn_version_text(90102), "9.1.2");
  EXPECT_EQ(cudnn_version_problem(91900), "");
  EXPECT_EQ(cudnn_version_problem(kCudnnMinVersion), "");
  const std::string old = cudnn_version_problem(80907);
  EXPECT_NE(old.find("cuDNN 8.9.7 is not major version 9"), std::string::npos) << old;
  const std::string newer = cudnn_version_problem(100100);
  EXPECT_NE(newer.find("cuDNN 10.1.0 is not major version 9"), std::string::npos) << newer;
}

TEST(CudnnLibrary, InstalledLibraryAccepted) {
  const CudnnLoad load = cudnn_load_from({kCudnnSonames[0]});
  if (!load.ok() && load.version == 0) {
    std::printf("skipped: %s\n", load.why.c_str());
    GTEST_SKIP() << "skipped: no libcudnn installed (" << load.why << ")";
  }
  ASSERT_TRUE(load.ok()) << load.why;
  EXPECT_GE(load.version, kCudnnMinVersion);
  EXPECT_EQ(load.version / 10000, static_cast<size_t>(kCudnnMajor));
  std::printf("libcudnn %s at %s\n", cudnn_version_text(load.version).c_str(),
              load.library->path().c_str());
}

TEST(CudnnLibrary, MissingFileNamed) {
  const std::string path = "/nonexistent/ledgerlm/libcudnn.so.9";
  const CudnnLoad load = cudnn_load_from({path});
  EXPECT_FALSE(load.ok());
  EXPECT_NE(load.why.find("cuDNN not loaded"), std::string::npos) << load.why;
  EXPECT_NE(load.why.find(path), std::string::npos) << load.why;
}

TEST(CudnnLibrary, LibraryWithoutGetVersionRefused) {
  const CudnnLoad load = cudnn_load_from({"libm.so.6"});
  EXPECT_FALSE(load.ok());
  EXPECT_NE(load.why.find("cudnnGetVersion not found"), std::string::npos) << load.why;
}

TEST(CudnnLibrary, WrongMajorRefused) {
  const CudnnLoad load = cudnn_load_from({LEDGERLM_FAKE_CUDNN8});
  EXPECT_FALSE(load.ok());
  EXPECT_EQ(load.version, 80907u);
  EXPECT_NE(load.why.find("cuDNN 8.9.7 is not major version 9"), std::string::npos) << load.why;
  EXPECT_NE(load.why.find(LEDGERLM_FAKE_CUDNN8), std::string::npos) << load.why;
}

TEST(CudnnLibrary, EnvironmentNamesTheFile) {
  setenv("LEDGERLM_CUDNN_LIBRARY", "/opt/x/libcudnn.so.9", 1);
  EXPECT_EQ(cudnn_library_names(), std::vector<std::string>{"/opt/x/libcudnn.so.9"});
  unsetenv("LEDGERLM_CUDNN_LIBRARY");
  EXPECT_EQ(cudnn_library_names(), std::vector<std::string>{kCudnnSonames[0]});
}

}  // namespace
}  // namespace ledgerlm
