// `ledgerlm prepare` at scale and the checksummed shards, through the binary:
//   - the shards are byte-identical for 1, 2 and 3 threads and chunk sizes from 7 bytes to 3 MiB
//     (the hidden --chunk-bytes), for bytes, hf-bpe and bpe, on a directory of documents, on
//     one 2.4 MB line and on 2.2 MB without any white space (hard cuts), test.bin too with a
//     --test-fraction; where no hard cut is needed the ids are those of encoding each part whole;
//   - peak memory stays bounded: an 80 MB corpus prepares in at most 76 MiB above what a tiny input
//     takes;
//   - a flipped byte in a shard stops `train` with one line naming the file and the MiB block,
//     before the run directory is made;
//   - a format-1 data directory (what ledgerlm wrote before shard checksums) gets one line saying
//     to re-run prepare, and prepare with --tokenizer from:OLD on the same input gives it the same
//     tokens.
//   - FIFOs, devices and links to folders in an input directory are counted by kind, in one line
//     and in meta.json, which stays as it was for a directory with nothing skipped.
// About 10 s on 2 cores (the 80 MB corpus 4 s of it); about 25 s under AddressSanitizer, which
// skips the memory test.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/chunker.h"
#include "data/corpus.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "model/base/rng.h"
#include "tests/support/cli_test_support.h"
#include "tests/support/test_util.h"
#include "train/run/run_dir.h"

namespace ledgerlm {
namespace {

namespace fs = std::filesystem;
using namespace testing;  // the command-line helpers (cli_test_support.h, test_util.h)

const std::vector<std::string> kWords = {
    "in",       "the",          "beginning", "was",  "word", "and",           "naïve",
    "日本",     "🙂",         "light",     "it's", "42",   "<|endoftext|>", "–",
    "\xC2\xA0", "\xE3\x80\x80", "don't",     "x",    "?!",   "LORD"};

// `lines` lines of words with tabs, space runs, CRLF and blank lines, from `seed`.
std::string words_doc(uint64_t seed, int lines) {
  std::string text;
  for (int l = 0; l < lines; ++l) {
    auto r = rng_bits(seed, RngStream::kSample, static_cast<uint64_t>(l), 0);
    const int n = 2 + static_cast<int>(r[0] % 12);
    for (int k = 0; k < n; ++k) {
      auto w = rng_bits(seed, RngStream::kSample, static_cast<uint64_t>(l), k + 1u);
      if (k > 0) text += (w[0] % 9 == 0) ? "\t" : (w[0] % 7 == 0 ? "   " : " ");
      text += kWords[w[1] % kWords.size()];
    }
    text += (r[1] % 10 == 0) ? "\n\n" : (r[1] % 13 == 0 ? "\r\n" : "\n");
  }
  return text;
}

// One line of `bytes` bytes (no "\n").
std::string one_line(uint64_t seed, size_t bytes) {
  std::string text;
  for (int l = 0; text.size() < bytes; ++l) {
    std::string part = words_doc(seed + static_cast<uint64_t>(l), 50);
    std::replace(part.begin(), part.end(), '\n', ' ');
    text += part;
  }
  return text;
}

// `bytes` bytes without any white space: letters, CJK, digits, punctuation.
std::string solid_text(size_t bytes) {
  std::string text;
  for (int i = 0; text.size() < bytes; ++i)
    text += (i % 5 == 0 ? "\xE6\x97\xA5\xE6\x9C\xAC" : "wordsandmore") + std::to_string(i) + ".,";
  return text;
}

class PrepareScale : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = testing::make_temp_dir("prepare_scale_");
    fs::create_directories(root_ + "/docs/sub");
    for (int i = 0; i < 24; ++i) {
      const std::string dir = root_ + (i % 3 == 0 ? "/docs/sub/" : "/docs/");
      write_file(dir + "d" + std::to_string(i) + ".txt", words_doc(10 + i, 60 + 40 * (i % 5)));
    }
    write_file(root_ + "/oneline.txt", one_line(1, 2'400'000));
    write_file(root_ + "/solid.txt", solid_text(2'200'000));
  }
  static std::string hf() {
    return testing::source_dir() + "/tests/reference/fixtures/hf_tokenizer";
  }

  // Prepares `input` into DIR; fails the test on error.
  static void prepare(const std::string& input, const std::string& dir, const std::string& extra) {
    CommandResult r = ledgerlm("prepare --input " + q(input) + " --out " + q(dir) + " " + extra);
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // 2 and 3 threads with the default chunk size, and each chunk size with 1, 2 or 3 threads in
  // turn, give the shards of one thread with the default chunk size (each pair separately would
  // be three times the runs for little more: the cut points do not depend on the thread count).
  // `extra` flags go to every run (a test split: --test-fraction, whose test.bin is compared too).
  static void expect_same_shards(const std::string& input, const std::string& tokenizer,
                                 const std::vector<uint64_t>& chunks, const std::string& name,
                                 const std::string& extra = "") {
    const std::string ref = root_ + "/" + name + "_ref";
    prepare(input, ref, "--tokenizer " + tokenizer + " --threads 1 " + extra);
    const bool with_test = extra.find("--test-fraction") != std::string::npos;
    ASSERT_EQ(fs::exists(ref + "/test.bin"), with_test) << name;
    std::vector<std::pair<int, uint64_t>> runs = {{2, kDefaultChunkBytes}, {3, kDefaultChunkBytes}};
    for (size_t i = 0; i < chunks.size(); ++i)
      runs.push_back({1 + static_cast<int>(i % 3), chunks[i]});
    for (const auto& [threads, chunk] : runs) {
      const std::string dir =
          root_ + "/" + name + "_t" + std::to_string(threads) + "_c" + std::to_string(chunk);
      prepare(input, dir,
              "--tokenizer " + tokenizer + " --threads " + std::to_string(threads) +
                  " --chunk-bytes " + std::to_string(chunk) + " " + extra);
      for (const char* shard : {"/train.bin", "/val.bin", "/test.bin"}) {
        if (!with_test && std::string(shard) == "/test.bin") continue;
        EXPECT_TRUE(read_file(ref + shard) == read_file(dir + shard))
            << name << shard << " differs with " << threads << " threads, chunk " << chunk;
      }
      fs::remove_all(dir);
    }
  }

  static std::string root_;
};
std::string PrepareScale::root_;

std::vector<int32_t> shard_ids(const std::string& path) {
  TokenArray t = shard_load(path, nullptr);
  std::vector<int32_t> ids(static_cast<size_t>(t.size()));
  if (t.size() > 0) t.copy(0, t.size(), ids.data());
  return ids;
}

// The ids prepare must give a one-file corpus when no hard cut is needed: each part encoded
// whole, one eot after it.
void expect_whole_part_ids(const std::string& text, const std::string& dir) {
  const auto tok = tokenizer_load(dir);
  const size_t cut = corpus_split_point(text, 0.1);
  std::vector<int32_t> train = tok->encode(std::string_view(text).substr(0, cut));
  train.push_back(tok->eot_id());
  std::vector<int32_t> val = tok->encode(std::string_view(text).substr(cut));
  val.push_back(tok->eot_id());
  EXPECT_TRUE(shard_ids(dir + "/train.bin") == train) << dir << ": train ids differ";
  EXPECT_TRUE(shard_ids(dir + "/val.bin") == val) << dir << ": val ids differ";
}

TEST_F(PrepareScale, SameShardsForAnyThreadsAndChunkSizeBytes) {
  expect_same_shards(root_ + "/docs", "bytes", {7, 4096, 3u << 20, 100}, "bytes_docs");
  expect_same_shards(root_ + "/oneline.txt", "bytes", {4096, 300001, 3u << 20}, "bytes_line");
  expect_same_shards(root_ + "/docs", "bytes", {7, 4096}, "bytes_docs_test",
                     "--val-fraction 0.1 --test-fraction 0.1");
}

TEST_F(PrepareScale, SameShardsForAnyThreadsAndChunkSizeHf) {
  const std::string tok = "hf:" + hf();
  expect_same_shards(root_ + "/docs", tok, {7, 4096, 3u << 20, 100}, "hf_docs");
  expect_same_shards(root_ + "/oneline.txt", tok, {4096, 300001, 3u << 20}, "hf_line");
  expect_same_shards(root_ + "/solid.txt", tok, {4096, 300001, 3u << 20}, "hf_solid");
  expect_whole_part_ids(read_file(root_ + "/oneline.txt"), root_ + "/hf_line_ref");
}

TEST_F(PrepareScale, SameShardsForAnyThreadsAndChunkSizeBpe) {
  // The bpe tokenizer trained once; the other runs reuse it (--tokenizer from:DIR).
  const std::string line = one_line(2, 300'000);
  write_file(root_ + "/short_line.txt", line);
  prepare(root_ + "/docs", root_ + "/bpe_base", "--vocab-size 400");
  const std::string tok = "from:" + root_ + "/bpe_base";
  expect_same_shards(root_ + "/docs", tok, {7, 3u << 20, 4096}, "bpe_docs");
  expect_same_shards(root_ + "/short_line.txt", tok, {4096, 65536}, "bpe_line");
  expect_same_shards(root_ + "/docs", tok, {7, 4096}, "bpe_docs_test", "--test-fraction 0.05");
  expect_same_shards(root_ + "/short_line.txt", tok, {4096}, "bpe_line_test",
                     "--test-fraction 0.2");
  expect_whole_part_ids(line, root_ + "/bpe_line_ref");
}

// Peak resident memory of a command (its own process: the shell execs it), in KiB.
long peak_rss_kib(const std::string& command, int* exit_code) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = "exec " + command + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return usage.ru_maxrss;
}

TEST_F(PrepareScale, PeakMemoryIsBoundedNotProportional) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "resident memory is AddressSanitizer's shadow, not prepare's";
#endif
  // 80 MB: 1 MB of varied lines written 80 times, each copy with a line of its own.
  const std::string big = root_ + "/big.txt";
  {
    const std::string block = words_doc(77, 30000);
    std::ofstream f(big, std::ios::binary);
    for (int i = 0; i < 80; ++i) f << "copy " << i << "\n" << block.substr(0, 1'000'000);
  }
  ASSERT_GE(fs::file_size(big), 80'000'000u);
  // The bound, above what the same command needs for a tiny input (the binary and its
  // libraries: ~20 MiB, or ~230 MiB where the build links the CUDA libraries): the read window
  // (~3 MiB), and at 2 threads 6 jobs in flight of ~1 MiB of text and up to 4 MiB of ids
  // (~30 MiB); 76 MiB leaves room for the allocator, and is still far below the corpus (before:
  // 77x the corpus).
  constexpr long kBoundKiB = 76 * 1024;
  const std::string tiny = root_ + "/tiny.txt";
  {
    std::ofstream f(tiny, std::ios::binary);
    f << words_doc(5, 200);
  }
  for (const std::string& tok : {std::string("bytes"), "hf:" + hf()}) {
    const auto prepare = [&](const std::string& input, const std::string& out) {
      int rc = 0;
      const long kib = peak_rss_kib(testing::ledgerlm_binary() + " prepare --input " + q(input) +
                                        " --out " + q(out) + " --threads 2 --tokenizer " + q(tok),
                                    &rc);
      EXPECT_EQ(rc, 0) << tok << " " << input;
      fs::remove_all(out);
      return kib;
    };
    const long base = prepare(tiny, root_ + "/tiny_" + tok.substr(0, 2));
    const long kib = prepare(big, root_ + "/big_" + tok.substr(0, 2));
    std::printf(
        "prepare --tokenizer %s of 80 MB: peak resident memory %.1f MiB, %.1f MiB above a tiny "
        "input's (bound %ld)\n",
        tok == "bytes" ? "bytes" : "hf-bpe", static_cast<double>(kib) / 1024.0,
        static_cast<double>(kib - base) / 1024.0, kBoundKiB / 1024);
    EXPECT_LT(kib - base, kBoundKiB)
        << tok << ": peak resident memory " << kib << " KiB, " << base << " KiB for a tiny input";
  }
  fs::remove(big);
}

std::string tiny_flags(const std::string& data, const std::string& out, const std::string& name) {
  return " --data.dir " + q(data) + " --train.out_dir " + q(out) + " --train.name " + q(name) +
         " --model.n_layer 1 --model.n_head 2 --model.n_embd 16 --model.block_size 16"
         " --train.seq_len 16 --train.micro_batch 2 --train.eval_windows 64"
         " --train.eval_interval 0 --train.log_interval 100 --train.threads 1"
         " --train.max_steps 2";
}

TEST_F(PrepareScale, FlippedShardByteNamesTheFileAndBlock) {
  // val.bin: 2.5 MB of text at 2 bytes per token = 5 MiB in 5 blocks; train's start reads 64
  // val windows spread over all of it, so block 3 is read before the first step.
  const std::string data = root_ + "/flip";
  write_file(root_ + "/flip.txt", one_line(5, 5'000'000));
  prepare(root_ + "/flip.txt", data, "--tokenizer bytes --val-fraction 0.5");
  const std::string runs = root_ + "/flip_runs";
  std::string shard = read_file(data + "/val.bin");
  // The low byte of a token 3 MiB into the tokens: still a byte's id, a valid token.
  const size_t at = 32 + (3u << 20) + 12344;
  shard[at] = static_cast<char>(shard[at] ^ 0x10);
  ASSERT_TRUE(write_file(data + "/val.bin", shard));
  expect_one_line_error("train" + tiny_flags(data, runs, "r"),
                        {data + "/val.bin", "MiB block 3 of 5", "fails its CRC-32C checksum",
                         "damaged", "re-run `ledgerlm prepare`"});
  EXPECT_FALSE(fs::exists(runs + "/r"));
  shard[at] = static_cast<char>(shard[at] ^ 0x10);  // repaired: the run trains
  ASSERT_TRUE(write_file(data + "/val.bin", shard));
  CommandResult r = ledgerlm("train" + tiny_flags(data, runs, "r"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A shard in format 1: the 24-byte header (magic, version 1, width, count), the tokens.
std::string format_one_shard(const std::string& path) {
  const std::string raw = read_file(path);
  uint32_t version = 0, width = 0;
  uint64_t count = 0;
  std::memcpy(&version, raw.data() + 8, 4);
  if (version == 1) return raw;  // already (an older ledgerlm binary wrote it)
  std::memcpy(&width, raw.data() + 12, 4);
  std::memcpy(&count, raw.data() + 16, 8);
  std::string out = raw.substr(0, 24);
  out[8] = 1;
  return out + raw.substr(32, count * width);
}

// A directory's FIFOs, devices and links to folders are not read (a FIFO would block prepare, a
// linked folder is a second copy of a tree); they used to be passed over without a word. One line
// now counts them by kind, and meta.json's "sources" records the counts; a directory with nothing
// skipped gets the meta.json, sources.jsonl and shards it always had (no "skipped" key, no line).
TEST_F(PrepareScale, SkippedEntriesAreCountedByKindAndRecordedOnlyThen) {
  const std::string in = root_ + "/odd";
  fs::create_directories(in + "/real");
  write_file(in + "/a.txt", words_doc(5, 40));
  write_file(in + "/real/b.txt", words_doc(6, 40));
  const std::string clean = root_ + "/odd_clean", odd = root_ + "/odd_out";
  CommandResult r =
      ledgerlm("prepare --input " + q(in) + " --out " + q(clean) + " --tokenizer bytes");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("skipped"), std::string::npos) << r.output;
  const nlohmann::json clean_meta = nlohmann::json::parse(read_file(clean + "/meta.json"));
  EXPECT_FALSE(clean_meta["sources"].contains("skipped")) << clean_meta.dump();

  ASSERT_EQ(::mkfifo((in + "/pipe1").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((in + "/real/pipe2").c_str(), 0600), 0);
  fs::create_symlink("/dev/null", in + "/null");               // a device, through a link
  fs::create_directory_symlink(in + "/real", in + "/linked");  // a folder, not followed
  fs::create_symlink(in + "/nowhere", in + "/dangling");       // a link to nothing
  fs::create_directories(in + "/.hidden");                     // skipped by rule, not counted
  ASSERT_TRUE(fs::is_character_file("/dev/null"));
  r = ledgerlm("prepare --input " + q(in) + " --out " + q(odd) + " --tokenizer bytes");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("prepare: skipped 2 FIFOs, 1 device, 1 symbolic link to a folder (not "
                          "followed), 1 broken symbolic link\n"),
            std::string::npos)
      << r.output;
  nlohmann::json meta = nlohmann::json::parse(read_file(odd + "/meta.json"));
  EXPECT_EQ(
      meta["sources"]["skipped"],
      nlohmann::json({{"fifos", 2}, {"devices", 1}, {"folder_links", 1}, {"broken_links", 1}}))
      << meta.dump();
  // Everything else is the clean directory's: the same documents, the same tokens.
  meta["sources"].erase("skipped");
  EXPECT_EQ(meta, clean_meta);
  for (const char* f : {"/sources.jsonl", "/train.bin", "/val.bin"})
    EXPECT_TRUE(read_file(odd + f) == read_file(clean + f)) << f << " differs";

  // Nothing but skipped entries: the "no files" error says what was passed over.
  const std::string only = root_ + "/only_odd";
  fs::create_directories(only);
  ASSERT_EQ(::mkfifo((only + "/pipe").c_str(), 0600), 0);
  expect_one_line_error(
      "prepare --input " + q(only) + " --out " + q(root_ + "/only_out") + " --tokenizer bytes",
      {"no files found in " + only, "skipped 1 FIFO"});
}

TEST_F(PrepareScale, FormatOneDataDirectoryIsRefusedWithTheRemedy) {
  const std::string text = root_ + "/old.txt";
  write_file(text, words_doc(3, 3000));
  const std::string old_dir = root_ + "/old";
  prepare(text, old_dir, "--vocab-size 300");
  // Made into what ledgerlm wrote before shard checksums: format-1 shards and meta.json.
  nlohmann::json meta = nlohmann::json::parse(read_file(old_dir + "/meta.json"));
  if (meta["format_version"] != 1) {
    meta["format_version"] = 1;
    const nlohmann::json source = nlohmann::json::parse(read_file(old_dir + "/sources.jsonl"));
    meta["sources"] = nlohmann::json::array({source});
    ASSERT_TRUE(write_file(old_dir + "/meta.json", meta.dump(2) + "\n"));
    fs::remove(old_dir + "/sources.jsonl");
  }
  std::vector<std::string> old_shards;
  for (const char* s : {"/train.bin", "/val.bin"}) {
    old_shards.push_back(format_one_shard(old_dir + s));
    ASSERT_TRUE(write_file(old_dir + s, old_shards.back()));
  }
  const std::string runs = root_ + "/old_runs";
  expect_one_line_error("train" + tiny_flags(old_dir, runs, "r"),
                        {old_dir + "/train.bin", "format version 1 has no checksums",
                         "re-run `ledgerlm prepare`", "--tokenizer from:DIR"});
  EXPECT_FALSE(fs::exists(runs + "/r"));
  // The remedy: the same input with the old directory's tokenizer gives the same tokens.
  const std::string new_dir = root_ + "/renewed";
  prepare(text, new_dir, "--tokenizer from:" + old_dir);
  EXPECT_EQ(read_file(new_dir + "/tokenizer.model"), read_file(old_dir + "/tokenizer.model"));
  for (size_t i = 0; i < 2; ++i) {
    const char* s = i == 0 ? "/train.bin" : "/val.bin";
    EXPECT_TRUE(format_one_shard(new_dir + s) == old_shards[i]) << s << ": other tokens";
  }
  CommandResult r = ledgerlm("train" + tiny_flags(new_dir, runs, "r"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
}  // namespace ledgerlm
