// meta.json's test split (data/meta.h) and data_check over test.bin (data/data_check.h): the
// "test_fraction" and "test" keys written only with a test split and read back; a meta.json
// without them reads as before (no test split); one without the other, or a test_fraction out of
// (0, 1), is refused naming the key; data_check reads test.bin's header exactly as val.bin's
// (missing file, count other than meta.json's, damaged header). Milliseconds.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/data_check.h"
#include "data/meta.h"
#include "data/shard.h"
#include "model/base/check.h"
#include "tests/support/bytes_data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

// A bytes-tokenizer data directory: train 257 tokens, val 40, and test 30 when `with_test`.
std::string make_dir(const std::string& name, bool with_test) {
  const std::string dir = testing::make_temp_dir("meta_test_split_" + name + "_");
  DataMeta meta = testing::tiny_bytes_shards(dir, 324);
  if (with_test) testing::tiny_bytes_test_split(dir, meta);
  meta_write(dir + "/meta.json", meta);
  return dir;
}

nlohmann::json read_json(const std::string& dir) {
  return nlohmann::json::parse(testing::read_file(dir + "/meta.json"));
}

void write_json(const std::string& dir, const nlohmann::json& j) {
  ASSERT_TRUE(testing::write_file(dir + "/meta.json", j.dump(2) + "\n"));
}

TEST(MetaTestSplit, WrittenAndReadOnlyWithATestSplit) {
  const std::string with = make_dir("with", true);
  const nlohmann::json j = read_json(with);
  EXPECT_EQ(j.at("test_fraction").get<double>(), 0.05);
  EXPECT_EQ(j.at("test"), (nlohmann::json{{"tokens", 30}, {"bytes", 29}, {"documents", 1}}));
  const DataMeta m = meta_read(with);
  EXPECT_TRUE(m.has_test);
  EXPECT_EQ(m.test_fraction, 0.05);
  EXPECT_EQ(m.test.tokens, 30);
  EXPECT_EQ(m.test.bytes, 29);
  EXPECT_EQ(m.test.documents, 1);
  EXPECT_EQ(data_check(with).meta.test.tokens, 30);

  const std::string without = make_dir("without", false);
  const nlohmann::json k = read_json(without);
  EXPECT_FALSE(k.contains("test_fraction"));
  EXPECT_FALSE(k.contains("test"));
  const DataMeta n = meta_read(without);
  EXPECT_FALSE(n.has_test);
  EXPECT_EQ(n.test.tokens, 0);
  data_check(without);  // no test.bin wanted
}

TEST(MetaTestSplit, HalfOrOutOfRangeTestKeysAreRefused) {
  const std::string dir = make_dir("bad", true);
  const nlohmann::json good = read_json(dir);
  nlohmann::json j = good;
  j.erase("test");
  write_json(dir, j);
  EXPECT_NE(testing::error_of([&] { meta_read(dir); }).find("missing object 'test'"),
            std::string::npos);
  j = good;
  j.erase("test_fraction");
  write_json(dir, j);
  EXPECT_NE(testing::error_of([&] { meta_read(dir); }).find("missing key 'test_fraction'"),
            std::string::npos);
  for (double f : {0.0, 1.0, -0.5}) {
    j = good;
    j["test_fraction"] = f;
    write_json(dir, j);
    const std::string e = testing::error_of([&] { meta_read(dir); });
    EXPECT_NE(e.find("test_fraction"), std::string::npos) << e;
    EXPECT_NE(e.find("(0, 1)"), std::string::npos) << e;
  }
  j = good;
  j["test"]["tokens"] = -1;
  write_json(dir, j);
  EXPECT_NE(testing::error_of([&] { meta_read(dir); }).find("negative count in 'test'"),
            std::string::npos);
}

TEST(MetaTestSplit, DataCheckReadsTestBinLikeValBin) {
  const std::string dir = make_dir("check", true);
  const std::string shard = testing::read_file(dir + "/test.bin");
  // A count other than meta.json's.
  nlohmann::json j = read_json(dir);
  j["test"]["tokens"] = 31;
  write_json(dir, j);
  std::string e = testing::error_of([&] { data_check(dir); });
  EXPECT_NE(e.find(dir + "/test.bin"), std::string::npos) << e;
  EXPECT_NE(e.find("30 tokens"), std::string::npos) << e;
  j["test"]["tokens"] = 30;
  write_json(dir, j);
  // A damaged header (its token count, covered by the header's CRC).
  std::string damaged = shard;
  damaged[16] = static_cast<char>(damaged[16] ^ 0x01);
  ASSERT_TRUE(testing::write_file(dir + "/test.bin", damaged));
  e = testing::error_of([&] { data_check(dir); });
  EXPECT_NE(e.find(dir + "/test.bin"), std::string::npos) << e;
  // Missing.
  fs::remove(dir + "/test.bin");
  e = testing::error_of([&] { data_check(dir); });
  EXPECT_NE(e.find(dir + "/test.bin"), std::string::npos) << e;
  ASSERT_TRUE(testing::write_file(dir + "/test.bin", shard));
  EXPECT_EQ(data_check(dir).meta.test.tokens, 30);
}

}  // namespace
}  // namespace ledgerlm
