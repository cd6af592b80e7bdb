// The README documents every config key (under its section's table) and every subcommand, so
// the reference cannot silently fall behind the code.
#include <gtest/gtest.h>

#include <string>

#include "tests/support/test_util.h"
#include "train/config/config_keys.h"

namespace ledgerlm {
namespace {

TEST(Readme, ListsEveryConfigKeyInItsSection) {
  std::string readme = testing::read_file(testing::source_dir() + "/README.md");
  ASSERT_FALSE(readme.empty());
  RunConfig config;
  for (const auto& key : config_keys(config)) {
    size_t section = readme.find("**[" + key.section + "]**");
    ASSERT_NE(section, std::string::npos) << "README lacks the [" << key.section << "] table";
    size_t next = readme.find("**[", section + 3);
    std::string table =
        readme.substr(section, next == std::string::npos ? std::string::npos : next - section);
    EXPECT_NE(table.find("| `" + key.key + "` |"), std::string::npos)
        << "README's [" << key.section << "] table lacks " << key.full()
        << " (regenerate with scripts/gen_config_reference.py)";
  }
}

TEST(Readme, ListsEverySubcommand) {
  std::string readme = testing::read_file(testing::source_dir() + "/README.md");
  for (const char* cmd : {"prepare", "train", "eval", "sample", "bench", "config", "memory",
                          "export", "import", "compare", "study"})
    EXPECT_NE(readme.find(std::string("`ledgerlm ") + cmd), std::string::npos) << cmd;
}

}  // namespace
}  // namespace ledgerlm
