// SharedLibrary: what a caller gets when the library or a symbol is there, and when not: the
// reasons the optional vendor libraries' fallback lines are made of.
#include "model/base/shared_library.h"

#include <gtest/gtest.h>

#include <cmath>

namespace ledgerlm {
namespace {

TEST(SharedLibrary, OpensTheFirstNameThatLoadsAndFindsItsFunctions) {
  std::string why;
  // libm is on every glibc system; the first name does not exist.
  auto lib = SharedLibrary::open({"libledgerlm_no_such_library.so.1", "libm.so.6"}, &why);
  ASSERT_NE(lib, nullptr) << why;
  EXPECT_EQ(lib->name(), "libm.so.6");
  EXPECT_NE(lib->path().find("libm"), std::string::npos) << lib->path();
  auto cosine = lib->function<double (*)(double)>("cos", &why);
  ASSERT_NE(cosine, nullptr) << why;
  EXPECT_EQ(cosine(0.5), std::cos(0.5));
}

TEST(SharedLibrary, AMissingLibraryOrSymbolIsAReasonNamingIt) {
  std::string why;
  EXPECT_EQ(SharedLibrary::open({"libledgerlm_no_such_library.so.1"}, &why), nullptr);
  EXPECT_NE(why.find("libledgerlm_no_such_library.so.1"), std::string::npos) << why;

  auto lib = SharedLibrary::open({"libm.so.6"}, &why);
  ASSERT_NE(lib, nullptr) << why;
  why.clear();
  EXPECT_EQ(lib->find("ledgerlm_no_such_symbol", &why), nullptr);
  EXPECT_NE(why.find("ledgerlm_no_such_symbol"), std::string::npos) << why;
  EXPECT_NE(why.find("libm.so.6"), std::string::npos) << why;
}

}  // namespace
}  // namespace ledgerlm
