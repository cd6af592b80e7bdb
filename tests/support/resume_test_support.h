// Shared by the resume tests (test_resume_*), which drive the ledgerlm binary: preparing a small
// corpus once per process with the bytes tokenizer, and the command-line flags of the tiny model
// (L2 H2 C32 T32 B4, one thread, no periodic eval) that every run in these tests trains.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/support/test_util.h"

namespace ledgerlm::testing {

// Corpora of `count` pseudo-random picks from a 64-bit LCG seeded with `seed`: the same bytes on
// every machine, so a test's losses are reproducible. Letters: 'a'..'t', a newline after every
// 50th. Words: from `words`, every `sentence`-th ending its sentence with ".\n", else a space.
inline std::string lcg_letters(uint64_t seed, int count) {
  std::string text;
  uint64_t x = seed;
  for (int i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += static_cast<char>('a' + (x >> 33) % 20);
    if (i % 50 == 49) text += "\n";
  }
  return text;
}
inline std::string lcg_words(const std::vector<std::string>& words, uint64_t seed, int count,
                             int sentence) {
  std::string text;
  uint64_t x = seed;
  for (int i = 0; i < count; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    text += words[(x >> 33) % words.size()];
    text += (i % sentence == sentence - 1) ? ".\n" : " ";
  }
  return text;
}
// Sixteen words of pseudo-English for lcg_words.
inline const std::vector<std::string> kPseudoEnglish = {
    "the",   "lord", "said", "unto", "moses",    "and",    "land",  "of",
    "egypt", "went", "up",   "into", "mountain", "people", "light", "day"};

// `r` failed with exactly one line "ledgerlm: error: ..." in its output, containing every needle.
inline void expect_one_error_line(const CommandResult& r,
                                  std::initializer_list<std::string> needles) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  const size_t at = r.output.find("ledgerlm: error: ");
  ASSERT_NE(at, std::string::npos) << r.output;
  const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
  for (const auto& n : needles) EXPECT_NE(line.find(n), std::string::npos) << n << "\n" << line;
  EXPECT_EQ(r.output.find("ledgerlm: error: ", at + 1), std::string::npos) << r.output;
}

// Writes `text` as corpus.txt in a fresh temp dir named after `prefix`, runs `ledgerlm prepare`
// on it (bytes tokenizer) and returns the prepared data directory.
inline std::string resume_prepare_corpus(const std::string& prefix, const std::string& text) {
  const std::string tmp = make_temp_dir(prefix);
  write_file(tmp + "/corpus.txt", text);
  auto r = run_command(ledgerlm_binary() + " prepare --input " + tmp + "/corpus.txt --out " + tmp +
                       "/data --tokenizer bytes");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return tmp + "/data";
}

// Flags of a run `name` under `out` training the tiny model on the data in `data_dir`.
inline std::string resume_tiny_flags(const std::string& data_dir, const std::string& out,
                                     const std::string& name) {
  return " --data.dir " + data_dir + " --train.out_dir " + out + " --train.name " + name +
         " --model.n_layer 2 --model.n_head 2 --model.n_embd 32 --model.block_size 32"
         " --train.seq_len 32 --train.micro_batch 4 --train.eval_interval 0"
         " --train.eval_windows 4 --train.log_interval 100 --train.threads 1";
}

// A test file's corpus, prepared by resume_prepare_corpus on first use and shared by the file's
// tests (once per process), and the flags of tiny-model runs on it.
struct ResumeCorpus {
  std::string prefix;                 // of the temp dir, one per file
  std::function<std::string()> text;  // the corpus text

  const std::string& dir() const {
    static std::map<std::string, std::string> dirs;
    auto it = dirs.find(prefix);
    if (it == dirs.end()) it = dirs.emplace(prefix, resume_prepare_corpus(prefix, text())).first;
    return it->second;
  }
  // resume_tiny_flags of run `name` under `out` on this corpus.
  std::string flags(const std::string& out, const std::string& name) const {
    return resume_tiny_flags(dir(), out, name);
  }
};

}  // namespace ledgerlm::testing
