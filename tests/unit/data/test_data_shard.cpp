// Token shards (write/read, every kind of damage rejected with a message naming the file, a
// flipped token byte caught on first read naming the block, a format-1 shard refused with the
// remedy), sha256 against the FIPS 180-4 test vectors, and the per-document train/val split point.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "data/sha256.h"
#include "data/shard.h"
#include "model/base/check.h"
#include "model/base/crc32c.h"
#include "tests/support/data_test_support.h"
#include "tests/support/test_util.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;

// Each test's own temp directory, removed at the end of the test.
struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("llm_shard_") {}
};

// Expects `fn` to throw an Error whose message contains every string in `parts`.
template <class Fn>
void expect_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg;
  }
}

TEST(Shard, RoundTripNarrowAndWide) {
  TempDir tmp;
  MemoryTracker tracker;
  for (int64_t vocab : {int64_t{300}, int64_t{65535}, int64_t{100000}}) {
    std::vector<int32_t> tokens;
    for (int64_t i = 0; i < 1000; ++i) tokens.push_back(static_cast<int32_t>((i * 7919) % vocab));
    tokens.push_back(static_cast<int32_t>(vocab - 1));
    std::string path = tmp.file("s.bin");
    shard_write(path, tokens, vocab);
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    const int width = vocab <= 65535 ? 2 : 4;
    // One block of checksum: 32-byte header, the tokens, one CRC.
    EXPECT_EQ(fs::file_size(path), static_cast<uintmax_t>(32 + tokens.size() * width + 4));
    ShardHeader h = shard_read_header(path);
    EXPECT_EQ(h.version, kShardVersion);
    EXPECT_EQ(h.width, static_cast<uint32_t>(width));
    EXPECT_EQ(h.count, tokens.size());
    EXPECT_EQ(h.block_bytes, kShardBlockBytes);
    EXPECT_EQ(h.block_crcs.size(), 1u);
    {
      TokenArray t = shard_load(path, &tracker, vocab);
      ASSERT_EQ(t.size(), static_cast<int64_t>(tokens.size()));
      EXPECT_EQ(t.width(), width);
      for (size_t i = 0; i < tokens.size(); ++i)
        ASSERT_EQ(t.at(static_cast<int64_t>(i)), tokens[i]);
      std::vector<int32_t> copied(10);
      t.copy(990, 10, copied.data());
      EXPECT_EQ(copied, std::vector<int32_t>(tokens.begin() + 990, tokens.begin() + 1000));
      // The tokens are accounted to the data component of the memory ledger.
      EXPECT_GE(tracker.usage(MemTag::kData).current, static_cast<int64_t>(tokens.size() * width));
    }
    EXPECT_EQ(tracker.usage(MemTag::kData).current, 0);
  }
}

TEST(Shard, HeaderBytesAreTheDocumentedLayout) {
  TempDir tmp;
  shard_write(tmp.file("s.bin"), std::vector<int32_t>{1, 258}, 300);
  std::string raw = testing::read_file(tmp.file("s.bin"));
  // magic, version 2, width 2, count 2, block size 1 MiB, header CRC, tokens, one block CRC.
  const std::string tokens("\x01\0\x02\x01", 4);
  std::string header("LLMTOKS1\x02\0\0\0\x02\0\0\0\x02\0\0\0\0\0\0\0\0\0\x10\0", 28);
  const uint32_t block_crc = crc32c(tokens.data(), tokens.size());
  const std::string table(reinterpret_cast<const char*>(&block_crc), 4);
  const uint32_t header_crc = crc32c(table.data(), 4, crc32c(header.data(), 28));
  header += std::string(reinterpret_cast<const char*>(&header_crc), 4);
  EXPECT_EQ(raw, header + tokens + table);
  EXPECT_EQ(crc32c_text(block_crc), "crc32c:400c5292") << "CRC-32C of 01 00 02 01";
}

TEST(Shard, EmptyShardIsValid) {
  TempDir tmp;
  shard_write(tmp.file("e.bin"), std::vector<int32_t>{}, 257);
  TokenArray t = shard_load(tmp.file("e.bin"), nullptr, 257);
  EXPECT_EQ(t.size(), 0);
}

TEST(Shard, DamagedFilesAreRejectedNamingTheFile) {
  TempDir tmp;
  std::vector<int32_t> tokens(100, 5);
  std::string good = tmp.file("good.bin");
  shard_write(good, tokens, 300);
  const std::string raw = testing::read_file(good);

  std::string truncated = tmp.file("truncated.bin");
  testing::write_file(truncated, raw.substr(0, raw.size() - 3));
  expect_error([&] { shard_load(truncated, nullptr); }, {truncated, "truncated"});

  std::string short_header = tmp.file("short.bin");
  testing::write_file(short_header, raw.substr(0, 10));
  expect_error([&] { shard_read_header(short_header); }, {short_header, "truncated header"});

  std::string magic = tmp.file("magic.bin");
  std::string bad = raw;
  bad[0] = 'X';
  testing::write_file(magic, bad);
  expect_error([&] { shard_load(magic, nullptr); }, {magic, "wrong magic"});

  std::string version = tmp.file("version.bin");
  bad = raw;
  bad[8] = 9;
  testing::write_file(version, bad);
  expect_error([&] { shard_load(version, nullptr); }, {version, "version 9"});

  std::string width = tmp.file("width.bin");
  bad = raw;
  bad[12] = 3;
  testing::write_file(width, bad);
  expect_error([&] { shard_load(width, nullptr); }, {width, "token width 3"});

  std::string trailing = tmp.file("trailing.bin");
  testing::write_file(trailing, raw + "xy");
  expect_error([&] { shard_load(trailing, nullptr); }, {trailing, "2 trailing bytes"});

  std::string block = tmp.file("block.bin");
  bad = raw;
  bad[24] = 3;
  testing::write_file(block, bad);
  expect_error([&] { shard_load(block, nullptr); }, {block, "checksum block size"});

  // A header field or a table entry changed without changing the size: the header's CRC.
  for (size_t at : {size_t{16}, raw.size() - 1}) {
    std::string header = tmp.file("header.bin");
    bad = raw;
    bad[at] ^= 0x01;
    if (at == 16) {  // count 100 -> 101 needs 2 more bytes to stay the expected size
      bad.insert(32 + 200, 2, '\0');
    }
    testing::write_file(header, bad);
    expect_error([&] { shard_load(header, nullptr); },
                 {header, "the header or the checksum table fails its checksum", "damaged",
                  "re-run `ledgerlm prepare`"});
  }

  std::string missing = tmp.file("missing.bin");
  expect_error([&] { shard_load(missing, nullptr); }, {missing});

  // Tokens outside the vocab the data claims: found when their block is read.
  TokenArray small_vocab = shard_load(good, nullptr, 5);
  expect_error([&] { small_vocab.at(0); }, {good, "token 5", "outside the vocab"});
}

// A format-1 shard (24-byte header, no checksums: what ledgerlm wrote before version 2) is
// refused with one line that says how to get a checked one.
TEST(Shard, FormatOneIsRefusedWithTheRemedy) {
  TempDir tmp;
  std::string v1("LLMTOKS1\x01\0\0\0\x02\0\0\0\x02\0\0\0\0\0\0\0\x01\0\x02\x01", 28);
  testing::write_file(tmp.file("v1.bin"), v1);
  expect_error(
      [&] { shard_read_header(tmp.file("v1.bin")); },
      {tmp.file("v1.bin"), "format version 1 has no checksums", "re-run `ledgerlm prepare`"});
}

// Each flipped byte of the tokens is reported on the first read of its block, naming the file
// and the block, while the other blocks still read; the stored checksums are those of the blocks.
TEST(Shard, FlippedTokenByteCaughtInItsBlock) {
  TempDir tmp;
  const std::string path = tmp.file("s.bin");
  std::vector<int32_t> tokens(1000);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>((i * 37) % 300);
  shard_write(path, tokens, 300, 64);  // 64-byte blocks: 2000 token bytes in 32 blocks
  const ShardHeader h = shard_read_header(path);
  ASSERT_EQ(h.block_crcs.size(), 32u);
  const std::string raw = testing::read_file(path);
  for (size_t b = 0; b < 32; ++b) {
    const size_t bytes = std::min<size_t>(64, 2000 - b * 64);
    EXPECT_EQ(h.block_crcs[b], crc32c(raw.data() + 32 + b * 64, bytes)) << "block " << b;
  }
  for (const int64_t byte : {int64_t{0}, int64_t{700}, int64_t{1999}}) {
    SCOPED_TRACE(byte);
    std::string bad = raw;
    bad[32 + byte] ^= 0x40;
    testing::write_file(path, bad);
    TokenArray t = shard_load(path, nullptr, 300);  // opening checks the header and table only
    const int64_t block = byte / 64;
    const int64_t token = byte / 2;
    std::vector<int32_t> out(4);
    // A read in another block works; one touching the damaged block fails, every time.
    const int64_t other = block == 0 ? 999 : 0;
    EXPECT_EQ(t.at(other), tokens[static_cast<size_t>(other)]);
    const std::string where = "block " + std::to_string(block) + " of 32 (64-byte blocks)";
    expect_error([&] { t.copy(std::max<int64_t>(token - 1, 0), 2, out.data()); },
                 {path, where, "fails its CRC-32C checksum", "damaged"});
    expect_error([&] { t.at(token); }, {path, where});
    expect_error([&] { t.verify_all(); }, {path, where});
  }
  // The blocks prepare writes are named as MiB blocks.
  std::vector<int32_t> many((3u << 20) / 2 + 10, 7);  // 3 MiB and 20 bytes of 2-byte tokens
  shard_write(path, many, 300);
  std::string bad = testing::read_file(path);
  bad[32 + (2u << 20) + 5] ^= 0x01;
  testing::write_file(path, bad);
  TokenArray t = shard_load(path, nullptr, 300);
  expect_error([&] { t.verify_all(); },
               {path, "MiB block 2 of 4 (token bytes 2097152..3145727)", "damaged"});
}

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a', fed in uneven pieces to exercise the partial-block path.
  Sha256 h;
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    size_t n = std::min(left, chunk.size());
    h.update(std::string_view(chunk).substr(0, n));
    left -= n;
  }
  EXPECT_EQ(h.hex_digest(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The walk lists a directory's files in the order of sorting their full paths (what prepare did
// when it listed everything first), though it sorts one directory at a time: "a/x" after "a.txt"
// ('/' > '.'), before "a0"; hidden names skipped at every level; links to files read, links to
// directories not followed.
TEST(CorpusFiles, SameOrderAsSortingTheFullPaths) {
  TempDir tmp;
  const std::string root = tmp.file("c");
  for (const char* dir : {"a", "a/b", "a-b", "b", ".hidden", "z/.git"})
    fs::create_directories(root + "/" + dir);
  for (const char* f : {"a.txt", "a/x.txt", "a/b/y", "a/b.txt", "a0.txt", "a-b/q", "a-b.txt", "b/c",
                        "B", ".hidden/h", "z/.git/g", "z/.dot", "z/w"})
    testing::write_file(root + "/" + f, "t");
  fs::create_directory_symlink(root + "/a", root + "/link_dir");
  fs::create_symlink(root + "/a.txt", root + "/link_file");
  std::vector<std::string> expected;
  for (const char* f : {"B", "a-b.txt", "a-b/q", "a.txt", "a/b.txt", "a/b/y", "a/x.txt", "a0.txt",
                        "b/c", "link_file", "z/w"})
    expected.push_back(root + "/" + f);
  std::vector<std::string> sorted = expected;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(sorted, expected);  // the list above is in sorted order
  EXPECT_EQ(corpus_list_files({root}), expected);
  EXPECT_EQ(corpus_list_files({root + "/"})[0], root + "/B");  // a trailing slash kept as given
  EXPECT_EQ(corpus_list_files({root + "/a.txt", "-"}),
            (std::vector<std::string>{root + "/a.txt", "-"}));
}

TEST(CorpusSplit, CutsAtTheNearestLineStart) {
  // 10 lines of 10 bytes: val 0.1 of 100 bytes = the last line exactly.
  std::string text;
  for (int i = 0; i < 10; ++i) text += "line " + std::to_string(i) + "...\n";
  ASSERT_EQ(text.size(), 100u);
  EXPECT_EQ(corpus_split_point(text, 0.1), 90u);
  // 0.13 -> exact cut 87; nearest line start within 13/4 bytes is 90.
  EXPECT_EQ(corpus_split_point(text, 0.13), 90u);
  // 0.25 -> cut 75; line starts 70 and 80 are both 5 away (within 6): the earlier one wins.
  EXPECT_EQ(corpus_split_point(text, 0.25), 70u);
  EXPECT_EQ(corpus_split_point(text, 0.0), 100u);
  EXPECT_EQ(corpus_split_point(text, 0.001), 100u);  // rounds to zero val bytes
}

TEST(CorpusSplit, FallsBackToCharacterBoundary) {
  // One long line without newlines: cut inside it, but never inside a UTF-8 character.
  std::string text;
  for (int i = 0; i < 50; ++i) text += "日";   // 3 bytes each
  size_t cut = corpus_split_point(text, 0.1);  // exact cut 135, a character start
  EXPECT_EQ(cut, 135u);
  cut = corpus_split_point(text, 0.11);  // exact cut 133.5 -> 134, inside a character -> 132
  EXPECT_EQ(cut % 3, 0u);
  EXPECT_EQ(cut, 132u);
  // A far-away newline (outside the tolerance) is not used.
  std::string two = "a\n" + std::string(200, 'b');
  EXPECT_EQ(corpus_split_point(two, 0.1), two.size() - 20);
}

}  // namespace
}  // namespace ledgerlm
